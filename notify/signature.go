package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Standard Webhooks (https://www.standardwebhooks.com) headers.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// Slack request signing headers
// (https://api.slack.com/authentication/verifying-requests-from-slack).
const (
	HeaderSlackSignature = "X-Slack-Signature"
	HeaderSlackTimestamp = "X-Slack-Request-Timestamp"
)

// Tolerance is how far a signed request's timestamp may be from the
// receiver's clock, either way: five minutes, for Slack and Standard
// Webhooks alike.
const Tolerance = 5 * time.Minute

// ErrSignature is what every failed signature check wraps: a missing or
// malformed header, a wrong signature, a timestamp outside Tolerance, or a
// replay.
var ErrSignature = errors.New("notify: the signature does not verify")

// WebhookSecret is a Standard Webhooks signing secret: the key bytes,
// written "whsec_" + base64 of them.
type WebhookSecret []byte

// ParseWebhookSecret reads "whsec_" + base64 (standard alphabet, padded).
// The key must be 24 to 64 bytes long.
func ParseWebhookSecret(s string) (WebhookSecret, error) {
	raw, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return nil, errors.New(`a webhook secret is "whsec_" followed by base64`)
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return nil, fmt.Errorf("the webhook secret is not base64: %w", err)
	}
	if len(b) < 24 || len(b) > 64 {
		return nil, fmt.Errorf("the webhook secret has %d bytes; want 24 to 64", len(b))
	}
	return WebhookSecret(b), nil
}

// String is the secret's "whsec_" form.
func (s WebhookSecret) String() string { return "whsec_" + base64.StdEncoding.EncodeToString(s) }

// sign is base64(HMAC-SHA256(key, id "." timestamp "." body)).
func (s WebhookSecret) sign(id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, s)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SignWebhook sets the three Standard Webhooks headers of a message with
// the given id, sent at ts, carrying body: webhook-signature is "v1," +
// base64(HMAC-SHA256(secret, id + "." + unix seconds + "." + body)).
func SignWebhook(h http.Header, secret WebhookSecret, id string, ts time.Time, body []byte) {
	sec := ts.Unix()
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(sec, 10))
	h.Set(HeaderWebhookSignature, "v1,"+secret.sign(id, sec, body))
}

// VerifyWebhook checks the Standard Webhooks headers of a received message
// against body, at now: the timestamp must be within Tolerance and one of
// the space-separated signatures must be a "v1," signature by one of the
// secrets (several during a rotation). It returns the webhook-id, which
// the caller must refuse to process twice (Replays).
func VerifyWebhook(h http.Header, body []byte, now time.Time, secrets ...WebhookSecret) (string, error) {
	id, tsText, sigs := h.Get(HeaderWebhookID), h.Get(HeaderWebhookTimestamp), h.Get(HeaderWebhookSignature)
	if id == "" || tsText == "" || sigs == "" {
		return "", fmt.Errorf("%w: the webhook-id, webhook-timestamp and webhook-signature headers are required", ErrSignature)
	}
	if len(id) > 256 {
		return "", fmt.Errorf("%w: webhook-id longer than 256 bytes", ErrSignature)
	}
	ts, err := parseUnix(tsText, now)
	if err != nil {
		return "", err
	}
	for _, s := range secrets {
		want := []byte("v1," + s.sign(id, ts, body))
		for _, got := range strings.Fields(sigs) {
			if hmac.Equal([]byte(got), want) {
				return id, nil
			}
		}
	}
	return "", fmt.Errorf("%w: no v1 signature matches", ErrSignature)
}

// SlackSignature is the X-Slack-Signature of a request with the given
// X-Slack-Request-Timestamp and body: "v0=" + hex(HMAC-SHA256(signing
// secret, "v0:" + timestamp + ":" + body)).
func SlackSignature(signingSecret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(signingSecret))
	m.Write([]byte("v0:" + timestamp + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// VerifySlack checks a request Slack signed with the app's signing secret,
// at now: X-Slack-Request-Timestamp within Tolerance and X-Slack-Signature
// equal to SlackSignature. It returns the timestamp's text, which with the
// signature identifies the request for Replays.
func VerifySlack(h http.Header, body []byte, now time.Time, signingSecret string) (string, error) {
	tsText, sig := h.Get(HeaderSlackTimestamp), h.Get(HeaderSlackSignature)
	if tsText == "" || sig == "" {
		return "", fmt.Errorf("%w: the %s and %s headers are required", ErrSignature, HeaderSlackTimestamp, HeaderSlackSignature)
	}
	if _, err := parseUnix(tsText, now); err != nil {
		return "", err
	}
	if !hmac.Equal([]byte(sig), []byte(SlackSignature(signingSecret, tsText, body))) {
		return "", fmt.Errorf("%w: %s does not match", ErrSignature, HeaderSlackSignature)
	}
	return tsText, nil
}

// parseUnix reads a timestamp in decimal Unix seconds and checks it is
// within Tolerance of now.
func parseUnix(s string, now time.Time) (int64, error) {
	if len(s) > 12 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%w: the timestamp %q is not Unix seconds", ErrSignature, s)
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: the timestamp %q is not Unix seconds", ErrSignature, s)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > Tolerance || d < -Tolerance {
		return 0, fmt.Errorf("%w: the timestamp is %v away from this clock (at most %v)", ErrSignature, d.Round(time.Second), Tolerance)
	}
	return ts, nil
}

// Replays remembers the signed requests seen within the last 2 ×
// Tolerance, so that one captured request cannot be played again while
// its timestamp is still accepted. It holds at most Max keys (10,000 when
// zero) and refuses new requests rather than forget one it must remember.
type Replays struct {
	Max  int
	mu   sync.Mutex
	seen map[string]time.Time
}

// First records key at now and reports whether it is new. A key seen
// within 2 × Tolerance is a replay (false); so is any key once the set is
// full of keys that cannot be forgotten yet (fail closed).
func (r *Replays) First(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]time.Time{}
	}
	if at, ok := r.seen[key]; ok && now.Sub(at) < 2*Tolerance {
		return false
	}
	max := r.Max
	if max <= 0 {
		max = 10000
	}
	if len(r.seen) >= max {
		for k, at := range r.seen {
			if now.Sub(at) >= 2*Tolerance {
				delete(r.seen, k)
			}
		}
		if len(r.seen) >= max {
			return false
		}
	}
	r.seen[key] = now
	return true
}
