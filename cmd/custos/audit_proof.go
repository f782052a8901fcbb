package main

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway"
)

// What makes the audit log prove itself from the command line: the head
// file custos serve keeps beside the log, the gateway's key for a purge
// checkpoint, and bundles.

// auditHeadFile is the head file's name in the data directory: a copy of
// the last checkpoint record the gateway signed, kept outside the log.
const auditHeadFile = "audit.head.json"

// gatewayKeyName is the gateway's key in the data directory (custos serve
// creates it).
const gatewayKeyName = "gateway.key.jwk.json"

// maxHeadSize caps a head file (one record).
const maxHeadSize = audit.MaxRecordSize + 1

// auditHead keeps DIR/audit.head.json: after every checkpoint the gateway
// signs, the checkpoint record, written atomically. It never replaces a
// head with an older one (a lower seq), so a truncated log does not erase
// the evidence.
type auditHead struct {
	path   string
	logger *slog.Logger
	mu     sync.Mutex
	seq    uint64
}

// openAuditHead checks the head file in dir against the chain in b: a
// chain that no longer holds the checkpoint the head file copies was
// truncated or rewritten, and custos serve refuses to go on writing to it
// (the error says what to do). Without a head file there is nothing to
// check.
func openAuditHead(ctx context.Context, dir string, b audit.Backend, logger *slog.Logger) (*auditHead, error) {
	h := &auditHead{path: filepath.Join(dir, auditHeadFile), logger: logger}
	rec, err := readHeadRecord(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return nil, err
	}
	var found *audit.Record
	errStop := errors.New("stop")
	err = b.Range(ctx, rec.Seq, func(seq uint64, data []byte) error {
		if r, err := audit.ParseRecord(data); err == nil && r.Seq == rec.Seq {
			found = &r
		}
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, fmt.Errorf("checking the audit head file: %w", err)
	}
	if found == nil || found.Hash != rec.Hash {
		return nil, fmt.Errorf("the audit log does not hold checkpoint record %d (%s) that %s copies: records were removed or rewritten "+
			"after that checkpoint; run custos audit verify, keep the evidence, and move %s away to start anyway", rec.Seq, rec.Hash, h.path, h.path)
	}
	h.seq = rec.Seq
	return h, nil
}

// Write is an audit.Options.OnCheckpoint.
func (h *auditHead) Write(rec audit.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rec.Seq <= h.seq {
		return
	}
	data, err := rec.MarshalJSON()
	if err == nil {
		err = writeFileAtomic(h.path, func(w io.Writer) error {
			_, err := w.Write(append(data, '\n'))
			return err
		})
	}
	if err != nil {
		h.logger.Error("writing the audit head file", "path", h.path, "err", err)
		return
	}
	h.seq = rec.Seq
}

// readHeadRecord reads a head file: one checkpoint record.
func readHeadRecord(name string) (audit.Record, error) {
	data, err := readFileMax(name, maxHeadSize, "an audit head file")
	if err != nil {
		return audit.Record{}, err
	}
	rec, err := audit.ParseRecord(bytes.TrimSpace(data))
	if err != nil {
		return audit.Record{}, fmt.Errorf("%s: not an audit head file: %v", name, err)
	}
	if rec.Kind != audit.KindCheckpoint {
		return audit.Record{}, fmt.Errorf("%s: not an audit head file: a %s record, not a checkpoint", name, rec.Kind)
	}
	return rec, nil
}

// readHead reads a head file as an audit.Head, its signature checked with
// ckv when set.
func readHead(name string, ckv audit.CheckpointVerifier) (audit.Head, error) {
	rec, err := readHeadRecord(name)
	if err != nil {
		return audit.Head{}, err
	}
	return audit.HeadOf(rec, "head file "+name, ckv)
}

// readKeySet reads a JWK Set, or one JWK (the gateway's key file: only
// its public part is kept). A private key in a set is refused: a set is
// published.
func readKeySet(name string) (jose.JSONWebKeySet, error) {
	data, err := readFileMax(name, maxKeysSize, "a key set")
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	set, err := parseKeySet(data, true)
	if err != nil {
		return set, fmt.Errorf("%s: %w", name, err)
	}
	return set, nil
}

// parseKeySet parses a JWK Set of public keys; with one, a single JWK
// (its public part) is accepted too.
func parseKeySet(data []byte, one bool) (jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil || len(set.Keys) == 0 {
		var k jose.JSONWebKey
		if !one || json.Unmarshal(data, &k) != nil || k.KeyID == "" {
			return jose.JSONWebKeySet{}, errors.New("neither a JWK Set nor a JWK with a kid")
		}
		return jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.Public()}}, nil
	}
	for _, k := range set.Keys {
		if !k.IsPublic() {
			return jose.JSONWebKeySet{}, fmt.Errorf("the JWK Set holds a private key (kid %q): publish only public keys", k.KeyID)
		}
		if k.KeyID == "" {
			return jose.JSONWebKeySet{}, errors.New("a key of the JWK Set has no kid")
		}
	}
	return set, nil
}

// keysVerifier checks checkpoints with set.
func keysVerifier(set jose.JSONWebKeySet) audit.CheckpointVerifier {
	return gateway.CheckpointKeys{Keys: sig.NewStaticJWKS(set)}
}

// thumbprints names the keys of set: kid and RFC 7638 SHA-256 thumbprint,
// to compare with the gateway's published JWKS.
func thumbprints(set jose.JSONWebKeySet) string {
	var parts []string
	for _, k := range set.Keys {
		tp, err := k.Thumbprint(crypto.SHA256)
		if err != nil {
			parts = append(parts, k.KeyID)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s (thumbprint %s)", k.KeyID, base64.RawURLEncoding.EncodeToString(tp)))
	}
	return strings.Join(parts, ", ")
}

// readSigningKey reads the gateway's private key file (mode 0600) as a
// checkpoint signer.
func readSigningKey(name string) (audit.CheckpointSigner, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %v): chmod 600 it", name, fi.Mode().Perm())
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var priv jose.JSONWebKey
	if err := json.Unmarshal(data, &priv); err != nil || priv.IsPublic() || priv.KeyID == "" {
		return nil, fmt.Errorf("%s: not a private JWK with a kid", name)
	}
	s, err := sig.NewSignerFromJWK(&priv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return gateway.CheckpointSigner{Signer: s, KID: priv.KeyID}, nil
}

// stateDir is the directory that holds the log the command works on when
// it is a SQLite file (the data directory, or the directory of --log):
// where the head file and the gateway's key are. "" for PostgreSQL.
func (e *auditEnv) stateDir() (string, error) {
	spec, from, err := e.logSpec()
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://") {
		return "", nil
	}
	path, _, err := e.path(spec, from)
	if err != nil {
		return "", err
	}
	return filepath.Dir(path), nil
}

// existing returns name when it exists, else "".
func existing(name string) string {
	if name == "" {
		return ""
	}
	if _, err := os.Stat(name); err != nil {
		return ""
	}
	return name
}
