package notify

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// The examples of the two specifications: Standard Webhooks' README and
// Slack's "Verifying requests from Slack".
const (
	swSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swTimestamp = 1614265330
	swBody      = `{"test": 2432232314}`
	swSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

	slackSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	slackTimestamp = "1531420618"
	slackBody      = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	slackSig       = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

func TestSignWebhookMatchesTheSpecExample(t *testing.T) {
	s, err := ParseWebhookSecret(swSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	SignWebhook(h, s, swID, time.Unix(swTimestamp, 0), []byte(swBody))
	if got := h.Get(HeaderWebhookSignature); got != swSignature {
		t.Fatalf("signature %s, want %s", got, swSignature)
	}
	if s.String() != swSecret {
		t.Fatalf("String() = %s", s)
	}
}

func TestVerifyWebhook(t *testing.T) {
	good, _ := ParseWebhookSecret(swSecret)
	other, _ := ParseWebhookSecret("whsec_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	at := time.Unix(swTimestamp, 0)
	header := func(mod func(http.Header)) http.Header {
		h := http.Header{}
		h.Set(HeaderWebhookID, swID)
		h.Set(HeaderWebhookTimestamp, strconv.Itoa(swTimestamp))
		h.Set(HeaderWebhookSignature, swSignature)
		if mod != nil {
			mod(h)
		}
		return h
	}
	cases := []struct {
		name    string
		h       http.Header
		body    string
		now     time.Time
		secrets []WebhookSecret
		ok      bool
	}{
		{"valid", header(nil), swBody, at, []WebhookSecret{good}, true},
		{"valid during a rotation", header(nil), swBody, at, []WebhookSecret{other, good}, true},
		{"several signatures", header(func(h http.Header) { h.Set(HeaderWebhookSignature, "v1,bm9wZQ== "+swSignature) }), swBody, at, []WebhookSecret{good}, true},
		{"within the window", header(nil), swBody, at.Add(Tolerance - time.Second), []WebhookSecret{good}, true},
		{"wrong secret", header(nil), swBody, at, []WebhookSecret{other}, false},
		{"body changed", header(nil), `{"test": 2432232315}`, at, []WebhookSecret{good}, false},
		{"id changed", header(func(h http.Header) { h.Set(HeaderWebhookID, "msg_other") }), swBody, at, []WebhookSecret{good}, false},
		{"too old", header(nil), swBody, at.Add(Tolerance + time.Second), []WebhookSecret{good}, false},
		{"too new", header(nil), swBody, at.Add(-Tolerance - time.Second), []WebhookSecret{good}, false},
		{"v0 prefix", header(func(h http.Header) { h.Set(HeaderWebhookSignature, "v0"+swSignature[2:]) }), swBody, at, []WebhookSecret{good}, false},
		{"no signature", header(func(h http.Header) { h.Del(HeaderWebhookSignature) }), swBody, at, []WebhookSecret{good}, false},
		{"no id", header(func(h http.Header) { h.Del(HeaderWebhookID) }), swBody, at, []WebhookSecret{good}, false},
		{"timestamp not a number", header(func(h http.Header) { h.Set(HeaderWebhookTimestamp, "1614265330.0") }), swBody, at, []WebhookSecret{good}, false},
		{"negative timestamp", header(func(h http.Header) { h.Set(HeaderWebhookTimestamp, "-1") }), swBody, at, []WebhookSecret{good}, false},
		{"no secret", header(nil), swBody, at, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := VerifyWebhook(tc.h, []byte(tc.body), tc.now, tc.secrets...)
			if tc.ok != (err == nil) {
				t.Fatalf("VerifyWebhook: %v, want ok %v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrSignature) {
				t.Fatalf("error %v does not wrap ErrSignature", err)
			}
			if tc.ok && id != tc.h.Get(HeaderWebhookID) {
				t.Fatalf("id %q", id)
			}
		})
	}
}

func TestParseWebhookSecret(t *testing.T) {
	for _, s := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not*base64", "whsec_c2hvcnQ=", "whsec_"} {
		if _, err := ParseWebhookSecret(s); err == nil {
			t.Errorf("ParseWebhookSecret(%q) accepted", s)
		}
	}
}

func TestVerifySlack(t *testing.T) {
	at := time.Unix(1531420618, 0)
	header := func(ts, sig string) http.Header {
		h := http.Header{}
		if ts != "" {
			h.Set(HeaderSlackTimestamp, ts)
		}
		if sig != "" {
			h.Set(HeaderSlackSignature, sig)
		}
		return h
	}
	if got := SlackSignature(slackSecret, slackTimestamp, []byte(slackBody)); got != slackSig {
		t.Fatalf("SlackSignature = %s, want Slack's example %s", got, slackSig)
	}
	cases := []struct {
		name, secret, body string
		h                  http.Header
		now                time.Time
		ok                 bool
	}{
		{"valid", slackSecret, slackBody, header(slackTimestamp, slackSig), at, true},
		{"wrong secret", "another-secret", slackBody, header(slackTimestamp, slackSig), at, false},
		{"body changed", slackSecret, slackBody + "&x=1", header(slackTimestamp, slackSig), at, false},
		{"timestamp changed", slackSecret, slackBody, header("1531420619", slackSig), at, false},
		{"five minutes and a second old", slackSecret, slackBody, header(slackTimestamp, slackSig), at.Add(Tolerance + time.Second), false},
		{"from the future", slackSecret, slackBody, header(slackTimestamp, slackSig), at.Add(-Tolerance - time.Second), false},
		{"upper-case hex", slackSecret, slackBody, header(slackTimestamp, "v0=A2114D57B48EAC39B9AD189DD8316235A7B4A8D21A10BD27519666489C69B503"), at, false},
		{"no signature", slackSecret, slackBody, header(slackTimestamp, ""), at, false},
		{"no timestamp", slackSecret, slackBody, header("", slackSig), at, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifySlack(tc.h, []byte(tc.body), tc.now, tc.secret)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrSignature)) {
				t.Fatalf("VerifySlack: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestReplays(t *testing.T) {
	r := &Replays{Max: 2}
	now := time.Unix(1000, 0)
	if !r.First("a", now) || r.First("a", now.Add(time.Minute)) {
		t.Fatal("a replay within the window passed")
	}
	if !r.First("b", now) {
		t.Fatal("a new key was refused")
	}
	if r.First("c", now.Add(time.Second)) {
		t.Fatal("a full set accepted a key it cannot remember")
	}
	later := now.Add(2 * Tolerance)
	if !r.First("c", later) || !r.First("a", later.Add(time.Second)) {
		t.Fatal("keys past the window were not forgotten")
	}
}
