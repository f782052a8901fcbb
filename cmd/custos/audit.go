package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/internal/limits"
	"github.com/custos-runtime/custos/store"
	"github.com/custos-runtime/custos/store/pgaudit"
)

// The audit commands work on the SQLite audit log (package
// audit/sqliteaudit) or on an export of it. None of them creates a log.

// defaultAuditFile is the audit log's file name in the data directory, or
// in a directory named by --log.
const defaultAuditFile = store.StateFile

// maxAnchorSize caps an anchor file.
const maxAnchorSize = 4 << 10

type auditEnv struct {
	logFlag string // --log
	data    dataDir
	cmd     *cobra.Command
}

func newAuditCommand() *cobra.Command {
	env := &auditEnv{}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Verify, export and purge the tamper-evident audit log",
		Long: `Work on the hash-chained audit log kept in a SQLite file or in PostgreSQL.

The log is the one in custos.db in the data directory, where custos serve
writes it. ` + dataDirHelp + `

--log (or $CUSTOS_AUDIT_LOG) names another log instead: a SQLite file, a
directory holding custos.db (or the audit.db of the layout before it), or a
postgres:// URL (custos_schema=NAME selects the schema; default custos)
where gateway replicas write one chain. These commands never create a log:
a missing one is an error (exit 1) that says where they looked.

Exit codes: 0 when the command succeeded (for verify: the chain verifies),
1 when the log is missing or unreadable or the chain does not verify, 2 when
the command line is wrong.`,
		Example: `  custos audit verify --save-anchor audit.anchor.json
  custos audit verify --anchor audit.anchor.json --save-anchor audit.anchor.json
  custos audit export --from 100 --out audit-100.jsonl
  custos audit verify --file audit-100.jsonl
  custos audit purge`,
		// Without this, cobra prints the help and exits 0 for an unknown
		// subcommand of a group.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&env.logFlag, "log", "",
		"another audit log than the data directory's: a SQLite file, a directory holding custos.db, or a postgres:// URL (default $CUSTOS_AUDIT_LOG)")
	env.data.register(cmd)
	env.cmd = cmd
	cmd.AddCommand(env.verifyCommand(), env.exportCommand(), env.purgeCommand())
	return cmd
}

// logSpec is what names the log: --log, else (without --data)
// $CUSTOS_AUDIT_LOG; "" means the data directory's. from says which.
func (e *auditEnv) logSpec() (spec, from string, err error) {
	given := e.cmd != nil && e.cmd.PersistentFlags().Changed("log")
	switch {
	case given && e.data.given():
		return "", "", usageError{errors.New("--log and --data both name the audit log; give one")}
	case given:
		if e.logFlag == "" {
			return "", "", usageError{errors.New("--log: an empty location")}
		}
		return e.logFlag, "--log", nil
	case !e.data.given() && os.Getenv("CUSTOS_AUDIT_LOG") != "":
		return os.Getenv("CUSTOS_AUDIT_LOG"), "$CUSTOS_AUDIT_LOG", nil
	}
	return "", "", nil
}

// path resolves the log's file name and where it came from.
func (e *auditEnv) path(p, from string) (string, string, error) {
	if p == "" {
		dir, dfrom, err := e.data.resolve()
		if err != nil {
			return "", "", err
		}
		return inDir(dir), "the data directory, " + dfrom, nil
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return inDir(p), from, nil
	}
	return p, from, nil
}

// inDir is the audit log of a data directory: in its state file, or, in
// a directory not yet migrated to one (custos serve migrates it), in the
// audit.db of the layout before.
func inDir(dir string) string {
	p := filepath.Join(dir, defaultAuditFile)
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, "audit.db")); err == nil {
			return filepath.Join(dir, "audit.db")
		}
	}
	return p
}

// open opens the existing audit log; it refuses to create one. read: the
// command only reads it (an old file is then not migrated).
func (e *auditEnv) open(ctx context.Context, read bool) (*audit.Log, string, error) {
	spec, from, err := e.logSpec()
	if err != nil {
		return nil, "", err
	}
	if strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://") {
		loc, err := store.Parse(spec)
		if err != nil {
			return nil, "", err
		}
		name := loc.String() // without the password
		if loc.Schema != "" {
			name += " (schema " + loc.Schema + ")"
		}
		b, err := pgaudit.Open(ctx, loc.DSN, &pgaudit.Options{Schema: loc.Schema, MustExist: true})
		if errors.Is(err, pgaudit.ErrNoLog) {
			return nil, name, fmt.Errorf("no audit log at %s (from %s)", name, from)
		}
		if err != nil {
			return nil, name, err
		}
		return audit.New(b, nil), name, nil
	}
	path, from, err := e.path(spec, from)
	if err != nil {
		return nil, "", err
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, path, noStateError("audit log", path, from, "--log")
	case err != nil:
		return nil, path, err
	case !fi.Mode().IsRegular():
		return nil, path, fmt.Errorf("%s: not an audit log (not a regular file)", path)
	}
	open := store.OpenAudit
	if read {
		open = store.OpenAuditReadOnly
	}
	b, err := open(ctx, store.Location{Kind: store.KindSQLite, Path: path})
	if err != nil {
		return nil, path, err
	}
	return audit.New(b, nil), path, nil
}

func (e *auditEnv) verifyCommand() *cobra.Command {
	var (
		file       string
		bundle     string
		anchors    []string
		saveAnchor string
		partial    bool
		asJSON     bool
		keysFile   string
		headFile   string
		strict     bool
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain, its signed checkpoints and its tail, or an export or bundle",
		Long: `Walk the whole chain and check every record: its hash, its link to the
previous record and its seq, and every signed checkpoint (with --keys: its
signature). Prints a one-line summary and what can be said about the end of
the chain (the tail), or the first problem (altered, removed, reordered,
inserted or truncated record, or a bad checkpoint, with its seq) and exits 1.

Truncation. custos serve copies every checkpoint it signs to
audit.head.json in its data directory; verify reads that head file (or
--head FILE) and fails when the chain no longer holds the checkpoint it
copies ("truncated": proven). Without it, the tail is judged: a chain that
ends with a clean-stop checkpoint is complete as far as the gateway knows;
records left without the checkpoint the gateway promised (it signs one
every 10 minutes) are a suspected truncation or a crash: a warning on
standard error, exit 0, or exit 1 with --strict. A chain cut right after a
checkpoint, with the head file gone too, cannot be detected. An anchor
saved outside the machine (--save-anchor, --anchor) catches truncation too.

--file verifies an export (custos audit export) offline instead of the log;
"-" reads standard input. An export that does not start at seq 1 is checked
as a partial chain: its first record's link is taken as given. --partial
also accepts an export cut at its end (export --to), which may end with a
redacted record.

--bundle verifies a bundle (custos audit export --bundle) offline: no data
directory, no network; its checkpoints are checked with the bundle's own
JWKS, or with --keys (the gateway's published JWKS) when given.`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			local := cmd.Flags().Changed("log") || cmd.Flags().Changed("data")
			switch {
			case file != "" && bundle != "":
				return usageError{errors.New("--file and --bundle: give one")}
			case (file != "" || bundle != "") && local:
				return usageError{errors.New("--file and --bundle verify a file: --log and --data do not apply")}
			case partial && file == "":
				return usageError{errors.New("--partial applies only to --file")}
			}
			var (
				opts audit.VerifyOptions
				set  jose.JSONWebKeySet
			)
			if keysFile != "" {
				var err error
				if set, err = readKeySet(keysFile); err != nil {
					return err
				}
				opts.Checkpoints = keysVerifier(set)
			}
			for _, name := range anchors {
				a, err := readAnchor(name)
				if err != nil {
					return err
				}
				opts.Anchors = append(opts.Anchors, a)
			}
			if headFile == "" && file == "" && bundle == "" {
				dir, err := e.stateDir()
				if err != nil {
					return err
				}
				if dir != "" {
					headFile = existing(filepath.Join(dir, auditHeadFile))
				}
			}
			if headFile != "" {
				h, err := readHead(headFile, opts.Checkpoints)
				if err != nil {
					return err
				}
				opts.Heads = append(opts.Heads, h)
			}
			var (
				rep  audit.Report
				what string
				err  error
			)
			switch {
			case bundle != "":
				rep, what, set, err = verifyBundle(bundle, &opts, set)
			case file != "":
				rep, what, err = verifyExport(cmd, file, &opts, partial)
			default:
				opts.Now = time.Now()
				rep, what, err = e.verifyLog(cmd.Context(), opts)
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				if err := enc.Encode(rep); err != nil {
					return err
				}
			}
			if p := rep.Problem; p != nil {
				return fmt.Errorf("%s does not verify: record %d %s (position %d): %s", what, p.Seq, p.Kind, p.Position, p.Detail)
			}
			if saveAnchor != "" {
				if rep.Records == 0 {
					return fmt.Errorf("%s is empty: no anchor to save", what)
				}
				data, err := json.Marshal(rep.Anchor())
				if err != nil {
					return err
				}
				if err := writeFileAtomic(saveAnchor, func(w io.Writer) error {
					_, err := w.Write(append(data, '\n'))
					return err
				}); err != nil {
					return err
				}
			}
			if !asJSON {
				fmt.Fprintln(w, verifySummary(what, rep, opts))
				if rep.Tail != nil && rep.Records > 0 {
					fmt.Fprintf(w, "tail: %s\n", rep.Tail.Detail)
					if n := rep.Tail.UncleanStarts; n > 0 {
						fmt.Fprintf(w, "the gateway started %d %s without a clean stop before (a crash or a kill, or another replica was running)\n",
							n, plural(n, "time", "times"))
					}
				}
				if len(set.Keys) > 0 {
					fmt.Fprintf(w, "checkpoint keys: %s\n", thumbprints(set))
				}
				if saveAnchor != "" {
					fmt.Fprintf(w, "anchor seq %d saved to %s\n", rep.LastSeq, saveAnchor)
				}
			}
			if rep.Tail.Suspect() {
				if strict {
					return fmt.Errorf("%s: the tail may be truncated (--strict): %s", what, rep.Tail.Detail)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "custos: warning: %s: the tail may be truncated, or the gateway crashed: %s\n", what, rep.Tail.Detail)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "verify this exported JSON-lines file (\"-\": standard input) instead of the log")
	f.StringVar(&bundle, "bundle", "", "verify this bundle (custos audit export --bundle) offline instead of the log")
	f.StringArrayVar(&anchors, "anchor", nil, "an anchor file saved by --save-anchor that the chain must still hold (repeatable)")
	f.StringVar(&saveAnchor, "save-anchor", "", "after a successful check, save the last seq and hash to this file (mode 0600)")
	f.BoolVar(&partial, "partial", false, "with --file: accept an export cut at either end")
	f.BoolVar(&asJSON, "json", false, "print the verification report as JSON")
	f.StringVar(&keysFile, "keys", "", "check the signed checkpoints with these keys: the gateway's JWKS (/.well-known/arsia/jwks.json) or key file")
	f.StringVar(&headFile, "head", "", "a copy of the gateway's last checkpoint the chain must hold (default: audit.head.json beside the log)")
	f.BoolVar(&strict, "strict", false, "exit 1 when the tail is suspect (records without the promised checkpoint), not only warn")
	return cmd
}

// verifyBundle verifies a bundle file; set, when not empty, is the keys
// to use instead of the bundle's JWKS. It returns the keys it used.
func verifyBundle(name string, opts *audit.VerifyOptions, set jose.JSONWebKeySet) (audit.Report, string, jose.JSONWebKeySet, error) {
	f, err := os.Open(name)
	if err != nil {
		return audit.Report{}, "", set, err
	}
	defer f.Close()
	keys := func(jwks []byte) (audit.CheckpointVerifier, error) {
		s, err := parseKeySet(jwks, false)
		if err != nil {
			return nil, err
		}
		set = s
		return keysVerifier(s), nil
	}
	_, rep, err := audit.VerifyBundle(f, keys, *opts)
	if err != nil {
		return rep, "", set, fmt.Errorf("%s: %w", name, err)
	}
	return rep, "audit bundle " + name, set, nil
}

// maxKeysSize caps a --keys file.
const maxKeysSize = limits.FileBytes

func (e *auditEnv) verifyLog(ctx context.Context, opts audit.VerifyOptions) (audit.Report, string, error) {
	l, path, err := e.open(ctx, true)
	if err != nil {
		return audit.Report{}, "", err
	}
	defer l.Close()
	rep, err := l.VerifyWith(ctx, opts)
	if err != nil {
		return rep, "", fmt.Errorf("%s: %w", path, err)
	}
	return rep, "audit log " + path, nil
}

// verifyExport verifies an export read from name ("-": standard input).
// It is checked as a partial chain when it does not start at seq 1 or
// when partial is set, which it records in opts.
func verifyExport(cmd *cobra.Command, name string, opts *audit.VerifyOptions, partial bool) (audit.Report, string, error) {
	var r io.Reader = cmd.InOrStdin()
	what := "audit export on standard input"
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return audit.Report{}, "", err
		}
		defer f.Close()
		r, what = f, "audit export "+name
	}
	first, r, err := peekFirstSeq(r)
	if err != nil {
		return audit.Report{}, "", fmt.Errorf("reading %s: %w", what, err)
	}
	opts.Partial = partial || first > 1
	rep, err := audit.VerifyJSONL(r, *opts)
	if err != nil {
		return rep, "", fmt.Errorf("%s: %w", what, err)
	}
	if opts.Partial {
		what = "partial " + what
	}
	return rep, what, nil
}

// peekFirstSeq reads r up to its first non-empty line and returns that
// line's seq (0 when it has none or does not parse: the verifier reports
// it) and a reader that yields all of r again.
func peekFirstSeq(r io.Reader) (uint64, io.Reader, error) {
	br := bufio.NewReaderSize(r, audit.MaxRecordSize+2)
	var seen bytes.Buffer
	for {
		line, err := br.ReadSlice('\n')
		seen.Write(line)
		if t := bytes.TrimSpace(line); len(t) > 0 && (err == nil || errors.Is(err, io.EOF)) {
			var head struct {
				Seq uint64 `json:"seq"`
			}
			if json.Unmarshal(t, &head) != nil {
				head.Seq = 0
			}
			return head.Seq, io.MultiReader(&seen, br), nil
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF), errors.Is(err, bufio.ErrBufferFull):
			// Empty input, or a line too long for a record: the
			// verifier reports it.
			return 0, io.MultiReader(&seen, br), nil
		default:
			return 0, nil, err
		}
	}
}

func verifySummary(what string, rep audit.Report, opts audit.VerifyOptions) string {
	if rep.Records == 0 {
		return what + " OK: empty (0 records)"
	}
	s := fmt.Sprintf("%s OK: %d %s (%d redacted), seq %d..%d, head %s",
		what, rep.Records, plural(rep.Records, "record", "records"), rep.Redacted, rep.FirstSeq, rep.LastSeq, rep.Head)
	if n := len(opts.Anchors); n > 0 {
		s += fmt.Sprintf(", %d %s held", n, plural(n, "anchor", "anchors"))
	}
	if opts.Partial {
		s += fmt.Sprintf(" (the link of record %d to earlier records is taken as given)", rep.FirstSeq)
	}
	if n := rep.Checkpoints; n > 0 {
		s += fmt.Sprintf("; %d signed %s, the last vouching for every record up to %d (signed %s)",
			n, plural(n, "checkpoint", "checkpoints"), rep.SignedThrough, rep.CheckpointTime)
		if after := rep.LastSeq - rep.SignedThrough - 1; after > 0 {
			s += fmt.Sprintf(", %d %s after it", after, plural(int(after), "record", "records"))
		}
	}
	if n := rep.UncheckedCheckpoints; n > 0 {
		s += fmt.Sprintf("; %d %s not checked (--keys names the gateway's keys)", n, plural(n, "checkpoint", "checkpoints"))
	}
	if n := rep.RepeatedApprovals; n > 0 {
		s += fmt.Sprintf("; %d %s an earlier one (same approval and resolution, written again after a restart or by another replica)",
			n, plural(n, "approval record repeats", "approval records repeat"))
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// readAnchor reads an anchor file written by verify --save-anchor.
func readAnchor(name string) (audit.Anchor, error) {
	data, err := readFileMax(name, maxAnchorSize, "an anchor file")
	if err != nil {
		return audit.Anchor{}, err
	}
	var a audit.Anchor
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return audit.Anchor{}, fmt.Errorf("%s: not an anchor file: %v", name, err)
	}
	if a.Seq < 1 || !isSHA256Digest(a.Hash) {
		return audit.Anchor{}, fmt.Errorf(`%s: not an anchor file: want {"seq": N >= 1, "hash": "sha256:<64 hex digits>"}`, name)
	}
	return a, nil
}

func isSHA256Digest(s string) bool {
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range hex {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func (e *auditEnv) exportCommand() *cobra.Command {
	var (
		from, to uint64
		out      string
		bundle   bool
		keysFile string
	)
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the audit log's records as JSON lines, or a bundle a third party verifies offline",
		Long: `Write the records with --from <= seq <= --to (default: all) as JSON lines,
one record's stored canonical JSON (hash included) per line, in seq order,
to standard output or to --out (created with mode 0600, replaced atomically).
Export does not verify the chain: run "custos audit verify --file" on the
output, anywhere, to check it.

--bundle writes a bundle instead: a manifest line (record and checkpoint
counts, the head hash, the export time and the gateway's JWK Set: public
keys only), then the whole chain. The chain is verified first, with those
keys and the head file beside the log, and a chain that does not verify is
not exported. "custos audit verify --bundle FILE" checks it with nothing
else: no data directory, no network. The keys are the gateway's key file
in the data directory (only its public part is written), or --keys (a
JWKS or key file).`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to != 0 && to < max(from, 1) {
				return usageError{fmt.Errorf("--to %d is before --from %d", to, from)}
			}
			if bundle && (cmd.Flags().Changed("from") || cmd.Flags().Changed("to")) {
				return usageError{errors.New("--bundle holds the whole chain: --from and --to do not apply")}
			}
			if keysFile != "" && !bundle {
				return usageError{errors.New("--keys applies only to --bundle")}
			}
			ctx := cmd.Context()
			var (
				opts audit.VerifyOptions
				jwks []byte
			)
			if bundle {
				dir, err := e.stateDir()
				if err != nil {
					return err
				}
				if keysFile == "" && dir != "" {
					keysFile = existing(filepath.Join(dir, gatewayKeyName))
				}
				if keysFile == "" {
					return fmt.Errorf("a bundle carries the gateway's public keys: no %s beside the log; give --keys (the gateway's JWKS or key file)", gatewayKeyName)
				}
				set, err := readKeySet(keysFile)
				if err != nil {
					return err
				}
				if jwks, err = json.Marshal(set); err != nil {
					return err
				}
				opts.Checkpoints = keysVerifier(set)
				if h := existing(filepath.Join(dir, auditHeadFile)); dir != "" && h != "" {
					head, err := readHead(h, opts.Checkpoints)
					if err != nil {
						return err
					}
					opts.Heads = []audit.Head{head}
				}
			}
			l, path, err := e.open(ctx, true)
			if err != nil {
				return err
			}
			defer l.Close()
			var (
				n int
				m audit.Manifest
			)
			export := func(w io.Writer) error {
				bw := bufio.NewWriterSize(w, 64<<10)
				var err error
				if bundle {
					if m, _, err = l.ExportBundle(ctx, bw, jwks, opts); err != nil {
						return fmt.Errorf("%s: %w", path, err)
					}
					n = m.Records
				} else if n, err = l.Export(ctx, bw, from, to); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				return bw.Flush()
			}
			if out == "" || out == "-" {
				return export(cmd.OutOrStdout())
			}
			if err := writeFileAtomic(out, export); err != nil {
				return err
			}
			if bundle {
				fmt.Fprintf(cmd.OutOrStdout(), "exported a bundle of %d %s (%d signed %s, head %s) from %s to %s\n", n, plural(n, "record", "records"),
					m.Checkpoints, plural(m.Checkpoints, "checkpoint", "checkpoints"), m.Head, path, out)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "exported %d %s from %s to %s\n", n, plural(n, "record", "records"), path, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&from, "from", 1, "first seq to export")
	f.Uint64Var(&to, "to", 0, "last seq to export (0: up to the last record)")
	f.StringVar(&out, "out", "", "write to this file instead of standard output")
	f.BoolVar(&bundle, "bundle", false, "write a bundle (manifest, the whole chain, the gateway's public keys) for offline verification")
	f.StringVar(&keysFile, "keys", "", "with --bundle: the gateway's JWKS or key file (default: the key file beside the log)")
	return cmd
}

func (e *auditEnv) purgeCommand() *cobra.Command {
	var keyFile string
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Redact the records whose retention period has passed",
		Long: `Redact every record whose retain_until is before now: it keeps seq, time,
kind, retain_until, prev and hash, and loses everything else. Records are
never deleted, so the chain still verifies. Each purge appends a purge
record saying what it redacted, then a checkpoint signed with the
gateway's key (the key file beside the log, or --key), so the purge is
vouched for at once; for a SQLite log the checkpoint is also copied to
the head file beside it (audit.head.json, see custos audit verify), and a
log that no longer holds the head file's checkpoint is not purged. Without
a key the purge is done and says it is not checkpointed: the gateway's
next checkpoint vouches for it. Run it periodically (for instance from
cron).`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			dir, err := e.stateDir()
			if err != nil {
				return err
			}
			if keyFile == "" && dir != "" {
				keyFile = existing(filepath.Join(dir, gatewayKeyName))
			}
			var signer audit.CheckpointSigner
			if keyFile != "" {
				var err error
				if signer, err = readSigningKey(keyFile); err != nil {
					return err
				}
			}
			b, path, err := e.open(ctx, false)
			if err != nil {
				return err
			}
			defer b.Close()
			o := &audit.Options{Signer: signer}
			if dir != "" && signer != nil {
				// The purge checkpoint goes to the head file beside the
				// log, which must still match the chain.
				head, err := openAuditHead(ctx, dir, b.Backend(), slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
				if err != nil {
					return err
				}
				o.OnCheckpoint = head.Write
			}
			l := audit.New(b.Backend(), o)
			n, err := l.Purge(ctx, time.Now())
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if n == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: nothing to purge (no record is past its retain_until)\n", path)
				return nil
			}
			note := ", checkpointed with " + keyFile
			if signer == nil {
				note = "; not checkpointed (no gateway key: --key names it); the gateway's next checkpoint vouches for the purge"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: redacted %d %s%s\n", path, n, plural(n, "record", "records"), note)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "the gateway's private key file to sign the purge checkpoint with (default: the key file beside the log)")
	return cmd
}

// writeFileAtomic writes a file with mode 0600 through a temporary file in
// the same directory, renamed over name once write succeeded.
func writeFileAtomic(name string, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(0o600); err != nil {
		return err
	}
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// readFileMax reads the file name, refusing one larger than max bytes:
// what, as "an anchor file", says what it should have been.
func readFileMax(name string, max int64, what string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: not %s (larger than %d bytes)", name, what, max)
	}
	return data, nil
}
