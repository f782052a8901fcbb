package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/jcs"
)

// The ARSIA commands: keygen, sign, verify, validate, profile, envelope.

func newKeygenCommand() *cobra.Command {
	var alg, agent, label, dir, use string
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen --agent ID",
		Short: "Generate an ARSIA signing key: a private JWK and a public JWKS",
		Long: `Generate a signing key for an ARSIA agent. Writes two files into --out:

  <label>.private.jwk.json  the private key as a JWK (mode 0600), for "custos sign --key"
  jwks.json                 the public key set to publish at /.well-known/arsia/jwks.json
                            and to give "custos verify --jwks"

The key id is "<agent>#<label>", as ARSIA requires. An existing jwks.json
gains the new key (key rotation: publish old and new keys together for at
least 24 hours); an existing private key file is never overwritten unless
--force is given.`,
		Example: "  custos keygen --agent agent:acme.billing --alg EdDSA --out keys/\n" +
			"  custos keygen --agent agent:acme.billing --use enc --label enc-1 --out keys/",
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !arsia.ValidAgentID(agent) {
				return usageError{fmt.Errorf("--agent %q is not an ARSIA agent identifier (agent:org.name)", agent)}
			}
			if label == "" || strings.ContainsAny(label, `/\#`) || label == "." || label == ".." {
				return usageError{fmt.Errorf("--label %q: want a name without /, \\ or #, such as key-2", label)}
			}
			var key crypto.Signer
			var err error
			switch use {
			case "sig":
				key, err = generateKey(alg)
			case "enc":
				// ARSIA-Core §5.3: senders encrypt to an EC P-256 key.
				alg = sig.ECDHES
				key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			default:
				return usageError{fmt.Errorf("--use %q: want sig or enc", use)}
			}
			if err != nil {
				return err
			}
			kid := agent + "#" + label
			priv := jose.JSONWebKey{Key: key, KeyID: kid, Algorithm: alg, Use: use}
			if !priv.Valid() {
				return fmt.Errorf("generated key is not a valid JWK")
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			privPath := filepath.Join(dir, label+".private.jwk.json")
			if err := writePrivateJWK(privPath, priv, force); errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s already exists and is kept: give another --label (the kid is <agent>#<label>; "+
					"a rotation keeps both keys in jwks.json), or --force to overwrite it", privPath)
			} else if err != nil {
				return err
			}
			jwksPath := filepath.Join(dir, "jwks.json")
			set, err := readJWKS(jwksPath)
			if err != nil {
				return err
			}
			pub := priv.Public()
			var kept []jose.JSONWebKey
			for _, k := range set.Keys {
				if k.KeyID != kid {
					kept = append(kept, k)
				}
			}
			set.Keys = append(kept, pub)
			setJSON, err := json.MarshalIndent(set, "", "  ")
			if err != nil {
				return err
			}
			if err := os.WriteFile(jwksPath, append(setJSON, '\n'), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "kid %s\nprivate key %s\npublic JWKS %s (%d key(s))\n", kid, privPath, jwksPath, len(set.Keys))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&alg, "alg", "EdDSA", "signature algorithm: EdDSA, ES256 or RS256")
	f.StringVar(&agent, "agent", "", "the agent identifier the key belongs to, e.g. agent:acme.billing")
	f.StringVar(&label, "label", "key-1", "key label; the kid is <agent>#<label>")
	f.StringVar(&dir, "out", ".", "folder to write the key files into")
	f.BoolVar(&force, "force", false, "overwrite an existing private key file")
	f.StringVar(&use, "use", "sig", `"sig" for a signing key, "enc" for an encryption key (EC P-256, ECDH-ES) others encrypt payloads to`)
	_ = cmd.RegisterFlagCompletionFunc("alg", cobra.FixedCompletions([]string{"EdDSA", "ES256", "RS256"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func generateKey(alg string) (crypto.Signer, error) {
	switch alg {
	case "EdDSA":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	case "ES256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "RS256":
		return rsa.GenerateKey(rand.Reader, 3072)
	}
	return nil, usageError{fmt.Errorf("--alg %q: want EdDSA, ES256 or RS256", alg)}
}

// writePrivateJWK writes a private key as an indented JWK, mode 0600, and
// syncs it. An existing file is refused unless overwrite is set.
func writePrivateJWK(path string, priv jose.JSONWebKey, overwrite bool) error {
	data, err := json.MarshalIndent(priv, "", "  ")
	if err != nil {
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if overwrite {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// readJWKS reads a JWKS file, or returns an empty set when it does not exist.
func readJWKS(path string) (*jose.JSONWebKeySet, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &jose.JSONWebKeySet{}, nil
	}
	if err != nil {
		return nil, err
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &set, nil
}

// readEnvelope reads and strictly decodes an envelope from the argument or
// standard input.
func readEnvelope(cmd *cobra.Command, args []string) (map[string]any, string, error) {
	data, name, err := readInput(cmd, args, arsia.DefaultMaxMessageBytes)
	if err != nil {
		return nil, name, err
	}
	env, err := sig.DecodeEnvelope(data)
	if err != nil {
		// The sig package names itself in its errors; reading a file is
		// not about signatures (validate reads envelopes too).
		return nil, name, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "sig: "))
	}
	return env, name, nil
}

func newSignCommand() *cobra.Command {
	var keyFile string
	cmd := &cobra.Command{
		Use:   "sign --key FILE [ENVELOPE|-]",
		Short: "Sign an ARSIA envelope",
		Long: `Sign an ARSIA envelope read from ENVELOPE or standard input with the private
JWK in --key (as written by "custos keygen"). The signature covers the RFC 8785
canonical form of the envelope without its "security" member; the output is
the signed envelope in canonical form. The key id must be the envelope's
"from" agent followed by "#".`,
		Args: argsUpTo(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return usageError{errors.New("--key is required")}
			}
			data, err := os.ReadFile(keyFile)
			if err != nil {
				return err
			}
			var jwk jose.JSONWebKey
			if err := json.Unmarshal(data, &jwk); err != nil {
				return fmt.Errorf("%s: %w", keyFile, err)
			}
			if jwk.IsPublic() {
				return fmt.Errorf("%s: holds a public key; signing needs the private key", keyFile)
			}
			signer, err := sig.NewSignerFromJWK(&jwk)
			if err != nil {
				return fmt.Errorf("%s: %w", keyFile, err)
			}
			env, _, err := readEnvelope(cmd, args)
			if err != nil {
				return err
			}
			signed, err := sig.Sign(env, signer, jwk.KeyID)
			if err != nil {
				return err
			}
			return writeCanonical(cmd.OutOrStdout(), signed)
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "private key as a JWK file")
	return cmd
}

func writeCanonical(w io.Writer, v any) error {
	out, err := jcs.CanonicalizeValue(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(out, '\n'))
	return err
}

func newVerifyCommand() *cobra.Command {
	var jwksRef, decryptKey string
	var algs []string
	cmd := &cobra.Command{
		Use:   "verify --jwks FILE|URL [ENVELOPE|-]",
		Short: "Verify an ARSIA envelope's signature",
		Long: `Verify the signature of an ARSIA envelope read from ENVELOPE or standard input
against the sender's public keys: a JWKS file, or an https:// URL of a JWKS
(cached per Cache-Control). The key is found by the envelope's kid, which must
belong to its "from" agent; only the algorithms in --alg are accepted.
Exits 1, saying why, when the signature does not verify. An envelope whose
payload is encrypted (security.encrypted) is decrypted after its signature
verified with --decrypt-key, your private encryption key, and the payload
printed; without it, verify says that the payload is encrypted.`,
		Args: argsUpTo(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if jwksRef == "" {
				return usageError{errors.New("--jwks is required")}
			}
			for _, a := range algs {
				if a != sig.EdDSA && a != sig.ES256 && a != sig.RS256 {
					return usageError{fmt.Errorf("--alg %q: want EdDSA, ES256 or RS256", a)}
				}
			}
			keys, err := openJWKS(jwksRef)
			if err != nil {
				return err
			}
			env, name, err := readEnvelope(cmd, args)
			if err != nil {
				return err
			}
			v, err := sig.Verify(cmd.Context(), env, keys, sig.VerifyOptions{Algorithms: algs, Now: time.Now})
			if err != nil {
				return fmt.Errorf("%s: signature not verified: %w", name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: signature verified (%s, kid %s, from %s)\n", name, v.Algorithm, v.KeyID, v.From)
			if v.Encrypted || decryptKey != "" {
				return decryptVerified(cmd.OutOrStdout(), name, v, decryptKey)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&jwksRef, "jwks", "", "sender's public keys: a JWKS file or an https:// URL")
	cmd.Flags().StringVar(&decryptKey, "decrypt-key", "", "decrypt an encrypted payload with this private JWK (\"use\": \"enc\") once the signature verified, and print it")
	cmd.Flags().StringSliceVar(&algs, "alg", []string{"EdDSA", "ES256", "RS256"}, "accepted signature algorithms")
	return cmd
}

func newValidateCommand() *cobra.Command {
	var opts arsia.ValidateOptions
	var asJSON bool
	var profilesFile, nowFlag string
	cmd := &cobra.Command{
		Use:   "validate [ENVELOPE|-]",
		Short: "Validate an ARSIA envelope: structure (L1), semantics (L2), compliance and freshness",
		Long: `Validate an ARSIA envelope read from ENVELOPE or standard input as a receiver
does: the JSON Schema (L1) first, and when that passes the semantic rules (L2),
the compliance rules R1-R7 on the inherited profile values, and freshness: a
message whose expires_at plus the clock skew has passed (message_expired), or
whose ts is more than the skew away from now (clock_skew_exceeded), is
refused as a receiver refuses it. The skew is the effective profile's (300 s,
EU-AI-ACT-HIGH-RISK 120 s, MIFID-II and DORA 60 s). "Now" is the current
time; --now pins it, to check an archived message as of when it arrived.
Signatures are checked by "custos verify". Exits 1 when any error is found;
warnings do not fail.`,
		Example: `  custos validate request.json
  custos validate --now 2026-04-30T10:00:00Z archived.json`,
		Args: argsUpTo(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now()
			if nowFlag != "" {
				t, err := time.Parse(time.RFC3339Nano, nowFlag)
				if err != nil {
					return usageError{fmt.Errorf("--now %q is not an RFC 3339 time such as 2026-04-30T10:00:00Z", nowFlag)}
				}
				now = t
			}
			if profilesFile != "" {
				data, err := os.ReadFile(profilesFile)
				if err != nil {
					return err
				}
				if opts.Profiles, err = compliance.Load(data); err != nil {
					return fmt.Errorf("%s: %w", profilesFile, err)
				}
			}
			env, name, err := readEnvelope(cmd, args)
			if err != nil {
				return err
			}
			var findings []finding
			structural := false
			for _, is := range arsia.Validate(env, opts) {
				structural = structural || is.Code == arsia.IssueSchemaViolation
				findings = append(findings, finding{Pointer: is.Pointer, Code: is.Code, Severity: string(is.Severity),
					Message: is.Message, Keyword: is.Keyword, text: string(is.Severity) + " " + is.String()})
			}
			// Freshness needs a readable ts and expires_at, which L1
			// guarantees; after an L1 error it would only repeat it.
			if !structural {
				if e := arsia.CheckFreshness(env, opts.Profiles, now); e != nil {
					field, _ := e.Details["field"].(string)
					findings = append(findings, finding{Pointer: field, Code: e.Code, Severity: string(arsia.SeverityError),
						Message: e.Description, text: string(arsia.SeverityError) + " " + e.Code + ": " + e.Description})
				}
			}
			if err := reportFindings(cmd.OutOrStdout(), name, "ARSIA envelope", findings, asJSON); err != nil {
				return err
			}
			if !asJSON {
				// A valid envelope may still carry a forged or broken
				// signature: say what this did not check.
				file := name
				if len(args) == 0 || args[0] == "-" {
					file = "-"
				}
				self, _ := selfCommand()
				fmt.Fprintf(cmd.OutOrStdout(), "%s: the signature was not checked; %s verify --jwks KEYS %s checks it\n", name, self, file)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.Strict, "strict", false, "an unknown compliance profile is an error (R1), not a fallback to GDPR-STANDARD")
	f.StringVar(&opts.IdentityClassification, "classification", "", "the sender's agent-level ai_system_classification (enables R6)")
	f.StringVar(&profilesFile, "profiles", "", "compliance profiles file (default: the bundled ARSIA profiles)")
	f.StringVar(&nowFlag, "now", "", "judge freshness as of this RFC 3339 time (default: the current time)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newProfileCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "List and show the ARSIA compliance profiles",
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the compliance profiles with their oversight mode and retention",
		Args:  argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg := compliance.Default()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%-24s %-27s %-10s %s\n", "PROFILE", "HUMAN OVERSIGHT", "RETENTION", "RESIDENCY")
			for _, name := range reg.Names() {
				p, _ := reg.Get(name)
				fmt.Fprintf(w, "%-24s %-27s %-10s %s\n", name, p.Defaults.HumanOversight, retention(p.Defaults.RetentionDays), orDash(p.Defaults.DataResidency))
			}
			return nil
		},
	}
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Show one compliance profile's defaults and references",
		Args:  argsExactly(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return compliance.Default().Names(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			p, ok := compliance.Default().Get(args[0])
			if !ok {
				return usageError{fmt.Errorf("unknown compliance profile %q (see: custos profile list)", args[0])}
			}
			w := cmd.OutOrStdout()
			d := p.Defaults
			line := func(k string, v any) {
				if k != "" {
					k += ":"
				}
				fmt.Fprintf(w, "%-24s %v\n", k, v)
			}
			line("Profile", p.Name)
			line("Status", p.Status)
			if p.Description != "" {
				line("Description", p.Description)
			}
			line("Human oversight", d.HumanOversight)
			line("Audit required", d.AuditRequired)
			line("Retention", retention(d.RetentionDays))
			line("Explainability", d.ExplainabilityRequired)
			line("PII involved", d.PIIInvolved)
			line("Legal basis", orDash(string(d.LegalBasis)))
			line("Data residency", orDash(d.DataResidency))
			skew := fmt.Sprintf("%ds", d.ClockSkewSeconds)
			if d.ClockSkewSeconds == 0 {
				skew = "300s (ARSIA default)"
			}
			line("Clock skew", skew)
			for i, ref := range p.RegulatoryReferences {
				if i == 0 {
					line("References", ref)
				} else {
					line("", ref)
				}
			}
			return nil
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}

func retention(days *int) string {
	if days == nil {
		return "-"
	}
	return fmt.Sprintf("%dd", *days)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newEnvelopeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "envelope",
		Short: "Build ARSIA envelopes",
	}
	var (
		from, to, payloadType, argsJSON, profile, keyFile, encryptTo string
		capabilities                                                 []string
		ttl                                                          time.Duration
	)
	newCmd := &cobra.Command{
		Use:   "new --from ID --to ID --capability CAP --type TYPE",
		Short: "Build an ARSIA request envelope (and sign it with --key)",
		Long: `Build an ARSIA request: a fresh UUID v4 id, the current time with millisecond
precision, expires_at after --ttl, the capabilities it needs, and the payload
type and args. --profile adds a compliance object naming that profile (its
defaults are filled in by the receiver's inheritance rules). With --key the
envelope is signed; otherwise sign it later with "custos sign". With
--encrypt-to the payload is first encrypted (JWE, ECDH-ES with A256GCM) to the
receiver's encryption key found in that JWKS, and the signature covers the
encrypted payload (see docs/encryption.md).`,
		Example: `  custos envelope new --from agent:acme.advisor --to agent:acme.billing \
      --capability billing.invoice.create --type com.acme.billing/create-invoice \
      --args '{"amount": "100.00", "currency": "EUR"}' --profile EU-AI-ACT-HIGH-RISK`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var args any
			if argsJSON != "" {
				decoded, err := jcs.Decode([]byte(argsJSON))
				if err != nil {
					return usageError{fmt.Errorf("--args: %w", err)}
				}
				args = decoded
			}
			opts := arsia.BuildOptions{Now: time.Now(), TTL: ttl}
			if profile != "" {
				if _, ok := compliance.Default().Get(profile); !ok {
					return usageError{fmt.Errorf("--profile %q: unknown (see: custos profile list)", profile)}
				}
				opts.Compliance = map[string]any{"profile": profile}
			}
			e, err := arsia.NewRequest(from, to, capabilities, payloadType, args, opts)
			if err != nil {
				// Every value NewRequest checks came from a flag.
				return usageError{err}
			}
			env, err := e.Map()
			if err != nil {
				return err
			}
			if encryptTo != "" {
				// Encrypt first, then sign: the signature covers the JWE.
				if env, err = encryptToJWKS(cmd.Context(), env, to, encryptTo); err != nil {
					return err
				}
			}
			if keyFile != "" {
				data, err := os.ReadFile(keyFile)
				if err != nil {
					return err
				}
				var jwk jose.JSONWebKey
				if err := json.Unmarshal(data, &jwk); err != nil {
					return fmt.Errorf("%s: %w", keyFile, err)
				}
				signer, err := sig.NewSignerFromJWK(&jwk)
				if err != nil {
					return fmt.Errorf("%s: %w", keyFile, err)
				}
				if env, err = sig.Sign(env, signer, jwk.KeyID); err != nil {
					return err
				}
			}
			return writeCanonical(cmd.OutOrStdout(), env)
		},
	}
	f := newCmd.Flags()
	f.StringVar(&from, "from", "", "sender agent identifier")
	f.StringVar(&to, "to", "", "receiver agent identifier")
	f.StringSliceVar(&capabilities, "capability", nil, "capability the request needs (repeatable)")
	f.StringVar(&payloadType, "type", "", "payload type, e.g. com.acme.billing/create-invoice")
	f.StringVar(&argsJSON, "args", "", "payload args as a JSON value")
	f.StringVar(&profile, "profile", "", "compliance profile to declare")
	f.DurationVar(&ttl, "ttl", arsia.DefaultRequestTTL, "time until expires_at")
	f.StringVar(&keyFile, "key", "", "sign with this private JWK")
	f.StringVar(&encryptTo, "encrypt-to", "", `encrypt the payload to the receiver's "use": "enc" key from this JWKS (a file or an https:// URL, such as the receiver's /.well-known/arsia/jwks.json)`)
	cmd.AddCommand(newCmd)
	return cmd
}
