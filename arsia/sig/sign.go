package sig

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/custos-runtime/custos/jcs"
)

// Members of an envelope's security object.
const (
	secAlg       = "alg"
	secKid       = "kid"
	secSig       = "sig"
	secEncrypted = "encrypted"
	secEncAlg    = "enc_alg"
	secEncMethod = "enc_method"
)

// SigningInput returns the bytes an ARSIA signature covers: the RFC 8785
// canonical form of env without its top-level "security" member. env is the
// generic decoded envelope (map[string]any, []any, string, json.Number,
// bool, nil; Go integers and float64 are accepted too). env is not modified.
func SigningInput(env map[string]any) ([]byte, error) {
	if env == nil {
		return nil, fmt.Errorf("%w: nil envelope", ErrMalformed)
	}
	b, _, err := signingInputCopy(nil, env, false)
	return b, err
}

// signingInputCopy appends SigningInput(env) to dst and, when copying,
// returns a deep copy of all of env (security included) made in the same
// walk, so that what was hashed is exactly what the caller gets back.
func signingInputCopy(dst []byte, env map[string]any, copying bool) ([]byte, map[string]any, error) {
	unsigned := make(map[string]any, len(env))
	for k, v := range env {
		if k != "security" {
			unsigned[k] = v
		}
	}
	var b []byte
	var c any
	var err error
	if copying {
		b, c, err = (*jcs.Options)(nil).AppendValueCopy(dst, unsigned)
	} else {
		b, err = (*jcs.Options)(nil).AppendValue(dst, unsigned)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if !copying {
		return b, nil, nil
	}
	cp := c.(map[string]any)
	if sec, ok := env["security"]; ok {
		if cp["security"], err = deepCopy(sec); err != nil {
			return nil, nil, err
		}
	}
	return b, cp, nil
}

// inputBuffers recycles the buffers Verify canonicalizes into; the signing
// input never outlives the call.
var inputBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Sign returns a copy of env signed by key under kid: security becomes
// {alg, kid, sig} with the signature over SigningInput(env) in unpadded
// base64url. The encrypted, enc_alg and enc_method members of an existing
// security object are kept (they are set by EncryptPayload, which must run
// first); everything else in it is replaced. env is not modified.
//
// kid must be the sender's agent id ("from"), "#" and a non-empty label, as
// receivers check (ErrKidPrefix).
func Sign(env map[string]any, key Signer, kid string) (map[string]any, error) {
	if key == nil {
		return nil, errors.New("sig: nil signer")
	}
	if err := checkKidPrefix(env, kid); err != nil {
		return nil, err
	}
	input, out, err := signingInputCopy(nil, env, true)
	if err != nil {
		return nil, err
	}
	sec := map[string]any{}
	if old, present := out["security"]; present {
		oldSec, ok := old.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: security is not an object", ErrMalformed)
		}
		for _, k := range []string{secEncrypted, secEncAlg, secEncMethod} {
			if v, ok := oldSec[k]; ok {
				sec[k] = v
			}
		}
	}
	raw, err := key.SignMessage(input)
	if err != nil {
		return nil, err
	}
	sec[secAlg] = key.Algorithm()
	sec[secKid] = kid
	sec[secSig] = base64.RawURLEncoding.EncodeToString(raw)
	out["security"] = sec
	return out, nil
}

// checkKidPrefix requires kid = from + "#" + label with a non-empty label.
func checkKidPrefix(env map[string]any, kid string) error {
	from, _ := env["from"].(string)
	if from == "" {
		return fmt.Errorf("%w: envelope has no string \"from\"", ErrKidPrefix)
	}
	label, ok := strings.CutPrefix(kid, from+"#")
	if !ok || label == "" {
		return fmt.Errorf("%w: kid %q, from %q", ErrKidPrefix, kid, from)
	}
	return nil
}

// maxCopyDepth bounds deepCopy so that a cyclic map built in Go cannot
// recurse forever; it is above the canonicalizer's own depth limit, which
// refuses such values anyway.
const maxCopyDepth = jcs.DefaultMaxDepth + 2

// deepCopy copies the generic JSON shapes so that a caller cannot change a
// value between its signing or verification and its use. It fails on
// nesting deeper than maxCopyDepth.
func deepCopy(v any) (any, error) {
	return copyValue(v, 0)
}

func copyValue(v any, depth int) (any, error) {
	if depth > maxCopyDepth {
		return nil, fmt.Errorf("%w: nesting too deep", ErrMalformed)
	}
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v, nil
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			c, err := copyValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		if v == nil {
			return v, nil
		}
		out := make([]any, len(v))
		for i, e := range v {
			c, err := copyValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case json.RawMessage:
		return append(json.RawMessage(nil), v...), nil
	default:
		return v, nil
	}
}
