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
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway"
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
		anchors    []string
		saveAnchor string
		partial    bool
		asJSON     bool
		keysFile   string
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain, or an exported JSON-lines file",
		Long: `Walk the whole chain and check every record: its hash, its link to the
previous record and its seq. Prints a one-line summary, or the first problem
(altered, removed, reordered or inserted record, with its seq) and exits 1.

The chain alone cannot show that records were cut off its end. Save an
anchor (the last seq and hash) outside the log with --save-anchor after a
successful check, and pass it to the next check with --anchor: a truncated
or rewritten chain no longer holds it. --anchor may be repeated; the same
file may be given to --anchor and --save-anchor.

--file verifies an export (custos audit export) offline instead of the log;
"-" reads standard input. An export that does not start at seq 1 is checked
as a partial chain: its first record's link is taken as given. --partial
also accepts an export cut at its end (export --to), which may end with a
redacted record.`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file != "" && (cmd.Flags().Changed("log") || cmd.Flags().Changed("data")) {
				return usageError{errors.New("--file verifies an export: --log and --data do not apply")}
			}
			if partial && file == "" {
				return usageError{errors.New("--partial applies only to --file")}
			}
			var opts audit.VerifyOptions
			if keysFile != "" {
				keys, err := readCheckpointKeys(keysFile)
				if err != nil {
					return err
				}
				opts.Checkpoints = keys
			}
			for _, name := range anchors {
				a, err := readAnchor(name)
				if err != nil {
					return err
				}
				opts.Anchors = append(opts.Anchors, a)
			}
			var (
				rep  audit.Report
				what string
				err  error
			)
			if file != "" {
				rep, what, err = verifyExport(cmd, file, &opts, partial)
			} else {
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
				if saveAnchor != "" {
					fmt.Fprintf(w, "anchor seq %d saved to %s\n", rep.LastSeq, saveAnchor)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "verify this exported JSON-lines file (\"-\": standard input) instead of the log")
	f.StringArrayVar(&anchors, "anchor", nil, "an anchor file saved by --save-anchor that the chain must still hold (repeatable)")
	f.StringVar(&saveAnchor, "save-anchor", "", "after a successful check, save the last seq and hash to this file (mode 0600)")
	f.BoolVar(&partial, "partial", false, "with --file: accept an export cut at either end")
	f.BoolVar(&asJSON, "json", false, "print the verification report as JSON")
	f.StringVar(&keysFile, "keys", "", "check the signed checkpoints with these keys: the gateway's JWKS (/.well-known/arsia/jwks.json) or key file")
	return cmd
}

// readCheckpointKeys reads the keys the gateway signs checkpoints with: a
// JWK Set, or one JWK (the gateway's key file: only its public part is
// used).
func readCheckpointKeys(name string) (audit.CheckpointVerifier, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeysSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxKeysSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxKeysSize)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil || len(set.Keys) == 0 {
		var k jose.JSONWebKey
		if err := json.Unmarshal(data, &k); err != nil || k.KeyID == "" {
			return nil, fmt.Errorf("%s: neither a JWK Set nor a JWK with a kid", name)
		}
		set.Keys = []jose.JSONWebKey{k.Public()}
	}
	return gateway.CheckpointKeys{Keys: sig.NewStaticJWKS(set)}, nil
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
	f, err := os.Open(name)
	if err != nil {
		return audit.Anchor{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxAnchorSize+1))
	if err != nil {
		return audit.Anchor{}, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > maxAnchorSize {
		return audit.Anchor{}, fmt.Errorf("%s: not an anchor file (larger than %d bytes)", name, maxAnchorSize)
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
	)
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the audit log's records as JSON lines",
		Long: `Write the records with --from <= seq <= --to (default: all) as JSON lines,
one record's stored canonical JSON (hash included) per line, in seq order,
to standard output or to --out (created with mode 0600, replaced atomically).

Export does not verify the chain: run "custos audit verify --file" on the
output, anywhere, to check it.`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to != 0 && to < max(from, 1) {
				return usageError{fmt.Errorf("--to %d is before --from %d", to, from)}
			}
			ctx := cmd.Context()
			l, path, err := e.open(ctx, true)
			if err != nil {
				return err
			}
			defer l.Close()
			var n int
			export := func(w io.Writer) error {
				bw := bufio.NewWriterSize(w, 64<<10)
				var err error
				if n, err = l.Export(ctx, bw, from, to); err != nil {
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
			fmt.Fprintf(cmd.OutOrStdout(), "exported %d %s from %s to %s\n", n, plural(n, "record", "records"), path, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&from, "from", 1, "first seq to export")
	f.Uint64Var(&to, "to", 0, "last seq to export (0: up to the last record)")
	f.StringVar(&out, "out", "", "write to this file instead of standard output")
	return cmd
}

func (e *auditEnv) purgeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Redact the records whose retention period has passed",
		Long: `Redact every record whose retain_until is before now: it keeps seq, time,
kind, retain_until, prev and hash, and loses everything else. Records are
never deleted, so the chain still verifies. Each purge appends a purge
record saying what it redacted. Run it periodically (for instance from
cron).`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			l, path, err := e.open(ctx, false)
			if err != nil {
				return err
			}
			defer l.Close()
			n, err := l.Purge(ctx, time.Now())
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if n == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: nothing to purge (no record is past its retain_until)\n", path)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: redacted %d %s\n", path, n, plural(n, "record", "records"))
			return nil
		},
	}
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
