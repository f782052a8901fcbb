package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/store/memstore"
)

const (
	botToken   = "xoxb-test-token"
	signingKey = "slack-signing-secret-for-tests"
	// secretValue is an argument value that must never leave under a PII
	// profile.
	secretValue = "DE89370400440532013000"
)

// deciderAdapter is what custos serve wires: httpapi.Decider's refusals
// as Refusals.
type deciderAdapter struct{ d *httpapi.Decider }

func (a deciderAdapter) Decide(ctx context.Context, d *aais.Decision, actor aais.Actor) (*aais.Message, error) {
	m, err := a.d.Decide(ctx, d, actor)
	var de *httpapi.DecisionError
	if errors.As(err, &de) {
		return nil, &Refusal{Status: de.Status, Detail: de.Detail}
	}
	return m, err
}

type world struct {
	t         *testing.T
	auth      *aais.Authority
	slack     *fakeSlack
	smtp      *fakeSMTP
	sink      *webhookSink
	slackCh   *Slack
	hook      *Webhook
	decisions *Decisions
	policy    *httpapi.Policy
	state     string
	secret    WebhookSecret
}

func newWorld(t *testing.T) *world {
	t.Helper()
	secret, err := ParseWebhookSecret("whsec_" + "c2VjcmV0LWZvci10aGUtd2ViaG9vay1vZi10aGUtdGVzdHM=")
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	auth, err := aais.NewAuthority(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, auth: auth, slack: newFakeSlack(t, botToken), smtp: newFakeSMTP(t), sink: newWebhookSink(t, secret),
		state: filepath.Join(t.TempDir(), "notify-state.json"), secret: secret}
	fast := func() *Retry { return &Retry{Attempts: 3, Backoff: time.Millisecond} }
	if w.slackCh, err = NewSlack(SlackOptions{Name: "ops", API: w.slack.api(), Token: botToken, Channel: "C0PS",
		SigningSecret: signingKey, TeamID: "T1", Users: map[string]string{"UALICE": "alice", "UBOB": "bob", "UGHOST": "ghost"}, Retry: fast()}); err != nil {
		t.Fatal(err)
	}
	if w.hook, err = NewWebhook(WebhookOptions{Name: "siem", URL: w.sink.srv.URL, Secret: secret, Retry: fast()}); err != nil {
		t.Fatal(err)
	}
	w.policy = &httpapi.Policy{
		Roles:                 map[string]httpapi.Role{"all": {All: true}},
		Grants:                map[string][]string{"alice": {"all"}, "bob": {"all"}},
		SeparationOfDuties:    []string{"MIFID-II"},
		JustificationRequired: []string{"DORA"},
	}
	d, err := httpapi.NewDecider(httpapi.ApprovalsOptions{Authority: auth, Policy: w.policy})
	if err != nil {
		t.Fatal(err)
	}
	w.decisions = &Decisions{Decider: deciderAdapter{d}, Requests: auth,
		Reviewers: map[string]aais.Actor{"alice": {DisplayName: "Alice"}, "bob": {}},
		JustificationRequired: func(a aais.Actor, r *aais.Request) bool {
			return w.policy.Permission(a, r).JustificationRequired
		}}
	return w
}

// notifier starts a notifier on the world's state file; stop ends it.
func (w *world) notifier() (stop func()) {
	t := w.t
	email, err := NewEmail(EmailOptions{Name: "mail", Addr: w.smtp.addr(), From: "custos@example.test",
		To: []string{"reviewers@example.test"}, Retry: &Retry{Attempts: 2, Backoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Options{Events: w.auth, Inbox: "https://custos.example/", StatePath: w.state, Poll: 5 * time.Millisecond,
		Redaction: Redaction{PII: func(p string) (bool, bool) {
			switch p {
			case "MIFID-II":
				return true, true
			case "DORA", "GDPR-STANDARD":
				return false, true
			}
			return false, false
		}},
		Channels: []Routed{
			{Channel: w.slackCh, Route: Route{MinRisk: aais.RiskMedium}},
			{Channel: w.hook},
			{Channel: email, Route: Route{Capabilities: []string{"payments.*"}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// submit records a request for capability name under profile at risk.
func (w *world) submit(id, name, profile string, risk aais.RiskLevel) *aais.Request {
	t := w.t
	t.Helper()
	action, _ := json.Marshal(map[string]any{"kind": "tool.call", "name": name, "summary": "Pay invoice to " + secretValue,
		"arguments": map[string]any{"iban": secretValue, "amount": 98765}, "resource": "bank:" + secretValue})
	ext, _ := json.Marshal(map[string]string{"exchange_id": "exc_" + id, "sender": "agent:acme.bot", "profile": profile})
	now := time.Now()
	req, err := aais.NewRequest(aais.RequestParams{ID: "apr_" + id, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Origin: aais.Origin{Harness: "custos", SessionID: "agent:acme.bot", AgentID: "agent:acme.bot"},
		Action: json.RawMessage(action), Risk: aais.Risk{Level: risk, Reasons: []string{"Moves money"}},
		Choices: []aais.Choice{{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"}},
		Extensions: aais.Extensions{"custos.dev/exchange": ext}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.auth.Create(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	return req
}

// interaction is a signed Slack interaction request.
func interaction(t *testing.T, secret string, at time.Time, payload map[string]any) *http.Request {
	t.Helper()
	p, _ := json.Marshal(payload)
	body := "payload=" + url.QueryEscape(string(p))
	r := httptest.NewRequest(http.MethodPost, "/notify/slack/ops/interactions", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	ts := strconv.FormatInt(at.Unix(), 10)
	r.Header.Set(HeaderSlackTimestamp, ts)
	r.Header.Set(HeaderSlackSignature, SlackSignature(secret, ts, []byte(body)))
	return r
}

func click(user, action string, req *aais.Request) map[string]any {
	return map[string]any{"type": "block_actions", "user": map[string]any{"id": user}, "team": map[string]any{"id": "T1"},
		"trigger_id": "trig-1", "channel": map[string]any{"id": "C0PS"},
		"actions": []map[string]any{{"action_id": action, "value": req.ID + " " + req.ActionDigest, "type": "button"}}}
}

// mailText is the decoded body of a message the fake SMTP server got.
func mailText(t *testing.T, data string) string {
	t.Helper()
	head, body, ok := strings.Cut(data, "\r\n\r\n")
	if !ok || !strings.Contains(head, "Content-Transfer-Encoding: quoted-printable") {
		t.Fatalf("not a quoted-printable message:\n%s", data)
	}
	b, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func (w *world) pending(id string) bool {
	st, err := w.auth.State(w.t.Context(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return st.Pending()
}

func TestAnnounceDecideFromSlackAndUpdate(t *testing.T) {
	w := newWorld(t)
	stop := w.notifier()
	defer func() { stop() }()
	req := w.submit("pay1", "payments.transfer", "GDPR-STANDARD", aais.RiskHigh)

	eventually(t, "the Slack message", func() bool { return len(w.slack.of("chat.postMessage")) == 1 })
	post := w.slack.of("chat.postMessage")[0]
	for _, want := range []string{req.ActionDigest, req.ID, "payments.transfer", "custos_approve", "custos_deny", "high", "Moves money",
		"https://custos.example/#/request/apr_pay1", `\"iban\": \"` + secretValue} {
		if !strings.Contains(post.Raw, want) {
			t.Errorf("chat.postMessage lacks %q: %s", want, post.Raw)
		}
	}
	if post.Args["channel"] != "C0PS" {
		t.Errorf("posted to %v", post.Args["channel"])
	}
	eventually(t, "the webhook", func() bool { _, ok := w.sink.got("ntf_apr_pay1.requested"); return ok })
	ev, _ := w.sink.got("ntf_apr_pay1.requested")
	var n Notice
	if ev.Type != "approval.requested" || json.Unmarshal(ev.Data, &n) != nil || n.ActionDigest != req.ActionDigest || n.Redacted {
		t.Fatalf("webhook event %+v", ev)
	}
	eventually(t, "the email", func() bool { return len(w.smtp.messages()) == 1 })
	mail := w.smtp.messages()[0]
	text := mailText(t, mail.Data)
	if mail.From != "custos@example.test" || mail.To[0] != "reviewers@example.test" ||
		!strings.Contains(text, "https://custos.example/#/request/apr_pay1") || !strings.Contains(text, req.ActionDigest) ||
		!strings.Contains(text, "cannot approve anything") || strings.Contains(text, "98765") ||
		!strings.Contains(mail.Data, "Subject: [custos] Approval requested: payments.transfer (high risk)\r\n") {
		t.Fatalf("email:\n%s", mail.Data)
	}

	h := w.slackCh.Handler(w.decisions)
	now := time.Now()
	refused := []struct {
		name   string
		r      *http.Request
		status int
	}{
		{"wrong secret", interaction(t, "not-the-secret", now, click("UALICE", slackApprove, req)), 401},
		{"old timestamp", interaction(t, signingKey, now.Add(-Tolerance-time.Minute), click("UALICE", slackApprove, req)), 401},
		{"unmapped user", interaction(t, signingKey, now, click("UMALLORY", slackApprove, req)), 403},
		{"mapped to an unknown reviewer", interaction(t, signingKey, now.Add(time.Second), click("UGHOST", slackApprove, req)), 403},
		{"another workspace", interaction(t, signingKey, now.Add(2*time.Second), map[string]any{"type": "block_actions",
			"user": map[string]any{"id": "UALICE"}, "team": map[string]any{"id": "T2"},
			"actions": []map[string]any{{"action_id": slackApprove, "value": req.ID + " " + req.ActionDigest}}}), 403},
		{"wrong digest", interaction(t, signingKey, now.Add(3*time.Second), map[string]any{"type": "block_actions",
			"user": map[string]any{"id": "UALICE"}, "team": map[string]any{"id": "T1"},
			"actions": []map[string]any{{"action_id": slackApprove, "value": req.ID}}}), 400},
	}
	for _, tc := range refused {
		if rec := serve(h, tc.r); rec.Code != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, rec.Code, rec.Body, tc.status)
		}
		if !w.pending(req.ID) {
			t.Fatalf("%s changed the request", tc.name)
		}
	}
	// The same signed request twice: the second is a replay.
	again := interaction(t, signingKey, now.Add(4*time.Second), click("UMALLORY", slackDeny, req))
	hdr := again.Header.Clone()
	if rec := serve(h, again); rec.Code != 403 {
		t.Fatalf("first: %d", rec.Code)
	}
	replay := interaction(t, signingKey, now.Add(4*time.Second), click("UMALLORY", slackDeny, req))
	replay.Header = hdr
	if rec := serve(h, replay); rec.Code != 401 {
		t.Fatalf("replay: %d %s", rec.Code, rec.Body)
	}

	ok := interaction(t, signingKey, now.Add(5*time.Second), click("UALICE", slackApprove, req))
	okHdr := ok.Header.Clone()
	if rec := serve(h, ok); rec.Code != 200 {
		t.Fatalf("approve: %d %s", rec.Code, rec.Body)
	}
	st, _ := w.auth.State(t.Context(), req.ID)
	if st.Pending() || st.Resolution.Event.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("not approved: %+v", st.Resolution)
	}
	who, _, _ := aais.DecidedBy(st.Resolution.Event.Resolution)
	if who.ID != "alice" || who.AuthenticatedBy != "slack/ops" || who.DisplayName != "Alice" {
		t.Fatalf("decided by %+v", who)
	}
	replayOK := interaction(t, signingKey, now.Add(5*time.Second), click("UALICE", slackApprove, req))
	replayOK.Header = okHdr
	if rec := serve(h, replayOK); rec.Code != 401 {
		t.Fatalf("replayed approval: %d", rec.Code)
	}

	eventually(t, "chat.update", func() bool { return len(w.slack.of("chat.update")) == 1 })
	up := w.slack.of("chat.update")[0]
	if up.Args["ts"] != "1700000000.000001" || up.Args["channel"] != "C0PS" || strings.Contains(up.Raw, "custos_approve") ||
		!strings.Contains(up.Raw, "Approved* by `alice` (via slack/ops)") {
		t.Fatalf("chat.update: %s", up.Raw)
	}
	eventually(t, "the resolution webhook", func() bool { _, ok := w.sink.got("ntf_apr_pay1.resolved"); return ok })
	eventually(t, "the ephemeral answers", func() bool { return len(w.slack.of("chat.postEphemeral")) >= 3 })
	eventually(t, "the resolution email", func() bool { return len(w.smtp.messages()) == 2 })
	if m := w.smtp.messages()[1]; !strings.Contains(mailText(t, m.Data), "Decided by alice (via slack/ops)") || !strings.Contains(m.Data, "In-Reply-To: <ntf_apr_pay1.requested@custos.invalid>") {
		t.Fatalf("resolution email:\n%s", m.Data)
	}
	if w.sink.bad != 0 {
		t.Fatalf("%d webhook deliveries did not verify", w.sink.bad)
	}
}

func TestRoutesAndRedaction(t *testing.T) {
	w := newWorld(t)
	stop := w.notifier()
	defer stop()
	low := w.submit("low", "reports.read", "GDPR-STANDARD", aais.RiskLow)
	pii := w.submit("pii", "payments.transfer", "MIFID-II", aais.RiskCritical)
	unknown := w.submit("unk", "payments.transfer", "NO-SUCH-PROFILE", aais.RiskHigh)
	eventually(t, "the webhooks", func() bool {
		_, a := w.sink.got("ntf_" + low.ID + ".requested")
		_, b := w.sink.got("ntf_" + pii.ID + ".requested")
		_, c := w.sink.got("ntf_" + unknown.ID + ".requested")
		return a && b && c
	})
	eventually(t, "the Slack messages", func() bool { return len(w.slack.of("chat.postMessage")) == 2 })
	eventually(t, "the emails", func() bool { return len(w.smtp.messages()) == 2 })
	// Slack's route starts at medium risk; email's covers payments.* only.
	for _, c := range w.slack.of("chat.postMessage") {
		if strings.Contains(c.Raw, low.ID) {
			t.Fatalf("a low-risk request went to Slack")
		}
	}
	for _, m := range w.smtp.messages() {
		if strings.Contains(m.Data, low.ID) {
			t.Fatalf("reports.read went to the payments mailbox")
		}
	}
	var everything strings.Builder
	for _, id := range []string{pii.ID, unknown.ID} {
		ev, _ := w.sink.got("ntf_" + id + ".requested")
		everything.Write(ev.Data)
		var n Notice
		if err := json.Unmarshal(ev.Data, &n); err != nil || !n.Redacted || n.Arguments != nil || n.Summary != "" ||
			strings.Join(n.ArgumentNames, ",") != "amount,iban" {
			t.Fatalf("notice of %s: %s", id, ev.Data)
		}
	}
	for _, c := range w.slack.of("chat.postMessage") {
		everything.WriteString(c.Raw)
	}
	for _, m := range w.smtp.messages() {
		everything.WriteString(mailText(t, m.Data))
	}
	if strings.Contains(everything.String(), secretValue) {
		t.Fatalf("a redacted value left: %s", everything.String())
	}
	ev, _ := w.sink.got("ntf_" + low.ID + ".requested")
	if !strings.Contains(string(ev.Data), secretValue) {
		t.Fatalf("a request without PII was redacted: %s", ev.Data)
	}
}

func TestRedactedActionShowsItsBindingHint(t *testing.T) {
	action := json.RawMessage(`{"kind":"tool.call","name":"db.query","summary":"Look up ` + secretValue + `",` +
		`"arguments":{"q":"` + secretValue + `"},"presentation":{"redacted":true,"binding_hint":"customer record 42"}}`)
	now := time.Now()
	req, err := aais.NewRequest(aais.RequestParams{ID: "apr_r", CreatedAt: now, Origin: aais.Origin{Harness: "h", SessionID: "s"},
		Action: action, Risk: aais.Risk{Level: aais.RiskLow, Reasons: []string{"x"}},
		Choices: []aais.Choice{{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"}}})
	if err != nil {
		t.Fatal(err)
	}
	n := NewNotice(req, 1, "", Redaction{})
	b, _ := json.Marshal(requestBlocks(n, nil))
	if !n.Redacted || n.BindingHint != "customer record 42" || n.Approvable || strings.Contains(string(b), secretValue) ||
		!strings.Contains(string(b), "customer record 42") || strings.Contains(string(b), slackApprove) {
		t.Fatalf("notice %+v\nblocks %s", n, b)
	}
}

func TestRestartAnnouncesOnlyWhatIsNew(t *testing.T) {
	w := newWorld(t)
	stop := w.notifier()
	w.submit("a", "payments.transfer", "GDPR-STANDARD", aais.RiskHigh)
	w.submit("b", "payments.transfer", "GDPR-STANDARD", aais.RiskHigh)
	eventually(t, "two messages", func() bool { return len(w.slack.of("chat.postMessage")) == 2 })
	stop()
	c := w.submit("c", "payments.transfer", "GDPR-STANDARD", aais.RiskHigh)
	stop = w.notifier()
	defer stop()
	eventually(t, "the third message", func() bool { return len(w.slack.of("chat.postMessage")) == 3 })
	// Resolving a request announced before the restart still updates its
	// message: the reference was kept in the state file.
	if _, err := w.auth.CancelOwned(t.Context(), aais.Owner{SessionID: "agent:acme.bot"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "three updates", func() bool { return len(w.slack.of("chat.update")) == 3 })
	time.Sleep(50 * time.Millisecond)
	posts := w.slack.of("chat.postMessage")
	if len(posts) != 3 || !strings.Contains(posts[2].Raw, c.ID) {
		t.Fatalf("after the restart: %d messages", len(posts))
	}
}

func TestJustificationModal(t *testing.T) {
	w := newWorld(t)
	stop := w.notifier()
	defer stop()
	req := w.submit("dora", "payments.transfer", "DORA", aais.RiskHigh)
	h := w.slackCh.Handler(w.decisions)
	now := time.Now()
	if rec := serve(h, interaction(t, signingKey, now, click("UBOB", slackApprove, req))); rec.Code != 200 {
		t.Fatalf("click: %d %s", rec.Code, rec.Body)
	}
	views := w.slack.of("views.open")
	if len(views) != 1 || !w.pending(req.ID) || !strings.Contains(views[0].Raw, req.ActionDigest) {
		t.Fatalf("views.open: %v, pending %v", views, w.pending(req.ID))
	}
	view := views[0].Args["view"].(map[string]any)
	submit := func(text string, at time.Time) *httptest.ResponseRecorder {
		return serve(h, interaction(t, signingKey, at, map[string]any{"type": "view_submission",
			"user": map[string]any{"id": "UBOB"}, "team": map[string]any{"id": "T1"},
			"view": map[string]any{"callback_id": view["callback_id"], "private_metadata": view["private_metadata"],
				"state": map[string]any{"values": map[string]any{"justification": map[string]any{"text": map[string]any{"value": text}}}}}}))
	}
	rec := submit("   ", now.Add(time.Second))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"response_action":"errors"`) || !w.pending(req.ID) {
		t.Fatalf("empty justification: %d %s", rec.Code, rec.Body)
	}
	if rec := submit("Ticket OPS-7 approved by the CFO", now.Add(2*time.Second)); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	st, _ := w.auth.State(t.Context(), req.ID)
	who, words, _ := aais.DecidedBy(st.Resolution.Event.Resolution)
	if st.Resolution.Event.Resolution.Outcome != aais.OutcomeApproved || who.ID != "bob" || words != "Ticket OPS-7 approved by the CFO" {
		t.Fatalf("resolution %+v by %v %q", st.Resolution.Event.Resolution, who, words)
	}
}

func TestSeparationOfDutiesHoldsFromSlack(t *testing.T) {
	w := newWorld(t)
	w.slackCh.o.Users["UAGENT"] = "agent:acme.bot"
	w.policy.Grants["agent:acme.bot"] = []string{"all"}
	w.decisions.Reviewers["agent:acme.bot"] = aais.Actor{}
	req := w.submit("sod", "payments.transfer", "MIFID-II", aais.RiskHigh)
	h := w.slackCh.Handler(w.decisions)
	if rec := serve(h, interaction(t, signingKey, time.Now(), click("UAGENT", slackApprove, req))); rec.Code != 403 || !w.pending(req.ID) {
		t.Fatalf("the requester approved from Slack: %d %s", rec.Code, rec.Body)
	}
	eventually(t, "the reason", func() bool {
		e := w.slack.of("chat.postEphemeral")
		return len(e) == 1 && strings.Contains(e[0].Raw, "Separation of duties")
	})
}

func TestWebhookCallbacks(t *testing.T) {
	w := newWorld(t)
	cbSecret, _ := ParseWebhookSecret("whsec_" + "Y2FsbGJhY2stc2VjcmV0LWZvci10aGUtdGVzdHMtb2s=")
	h, err := w.hook.CallbackHandler(w.decisions, CallbackOptions{Secrets: []WebhookSecret{cbSecret},
		Reviewers: map[string]string{"jira:carol": "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	req := w.submit("cb", "payments.transfer", "GDPR-STANDARD", aais.RiskHigh)
	post := func(secret WebhookSecret, id string, at time.Time, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/notify/webhook/siem/decisions", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		SignWebhook(r.Header, secret, id, at, []byte(body))
		return serve(h, r)
	}
	body := func(reviewer string, v aais.Verdict, digest string) string {
		b, _ := json.Marshal(CallbackDecision{RequestID: req.ID, ActionDigest: digest, Decision: v, Reviewer: reviewer})
		return string(b)
	}
	now := time.Now()
	for _, tc := range []struct {
		name   string
		rec    *httptest.ResponseRecorder
		status int
	}{
		{"signed with the outbound secret", post(w.secret, "msg_1", now, body("jira:carol", aais.Deny, req.ActionDigest)), 401},
		{"old", post(cbSecret, "msg_2", now.Add(-10*time.Minute), body("jira:carol", aais.Deny, req.ActionDigest)), 401},
		{"unmapped", post(cbSecret, "msg_3", now, body("jira:mallory", aais.Deny, req.ActionDigest)), 403},
		{"replayed id", post(cbSecret, "msg_3", now, body("jira:carol", aais.Deny, req.ActionDigest)), 401},
		{"unknown member", post(cbSecret, "msg_4", now, `{"request_id":"`+req.ID+`","action_digest":"x","decision":"deny","reviewer":"jira:carol","scope":"persistent"}`), 400},
		{"cancel", post(cbSecret, "msg_5", now, body("jira:carol", aais.Cancel, req.ActionDigest)), 400},
	} {
		if tc.rec.Code != tc.status || !w.pending(req.ID) {
			t.Errorf("%s: %d %s, want %d; pending %v", tc.name, tc.rec.Code, tc.rec.Body, tc.status, w.pending(req.ID))
		}
	}
	rec := post(cbSecret, "msg_6", now, body("jira:carol", aais.Deny, req.ActionDigest))
	m, err := aais.Parse(rec.Body.Bytes())
	if rec.Code != 200 || err != nil || m.Resolution.Outcome != aais.OutcomeDenied {
		t.Fatalf("deny: %d %s", rec.Code, rec.Body)
	}
	who, _, _ := aais.DecidedBy(m.Resolution)
	if who.ID != "alice" || who.AuthenticatedBy != "webhook/siem" {
		t.Fatalf("decided by %+v", who)
	}
	if rec := post(cbSecret, "msg_7", now, body("jira:carol", aais.Approve, req.ActionDigest)); rec.Code != 409 {
		t.Fatalf("decision on a resolved request: %d", rec.Code)
	}
}
