package config

import (
	"strings"
	"testing"
	"time"
)

const notifyBase = `
reviewers:
  - id: alice
    token_sha256: "sha256:0000000000000000000000000000000000000000000000000000000000000000"
notifications:
`

func TestNotifications(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, err string
	}{
		{"all three", `
  redact_profiles: [DORA]
  webhooks:
    - {name: siem, url: "https://hooks.example/custos", secret: "env:CUSTOS_WH", callback_secret: "whsec_b3RoZXItc2VjcmV0LW9mLXRoZS1jYWxsYmFja3M=", reviewers: {"jira:alice": alice}}
  slack:
    - {name: ops, channel: C0PS, token: "env:SLACK_TOKEN", signing_secret: "file:/run/slack", users: {U1: alice}, route: {min_risk: high, capabilities: ["payments.*"]}}
  email:
    - {name: mail, smtp: "smtp.example:587", from: custos@example.test, to: [ops@example.test], require_tls: true}
`, ""},
		{"bad name", `
  webhooks: [{name: "Siem!", url: "https://h.example", secret: "whsec_x"}]`, "webhooks[0].name"},
		{"duplicate name", `
  webhooks: [{name: a, url: "https://h.example", secret: "whsec_x"}]
  email: [{name: a, smtp: "h:25", from: a@b.c, to: [d@e.f]}]`, `email[0].name "a": another channel`},
		{"plain http", `
  webhooks: [{name: a, url: "http://h.example", secret: "whsec_x"}]`, "webhooks[0].url"},
		{"no secret", `
  webhooks: [{name: a, url: "https://h.example"}]`, "webhooks[0].secret: required"},
		{"not whsec", `
  webhooks: [{name: a, url: "https://h.example", secret: "hunter2"}]`, "webhooks[0].secret: want whsec_"},
		{"one secret both ways", `
  webhooks: [{name: a, url: "https://h.example", secret: "whsec_x", callback_secret: "whsec_x"}]`, "callback_secret: use another"},
		{"reviewers without callbacks", `
  webhooks: [{name: a, url: "https://h.example", secret: "whsec_x", reviewers: {x: alice}}]`, "set callback_secret"},
		{"unknown reviewer", `
  slack: [{name: s, channel: C1, token: t, signing_secret: s, users: {U1: mallory}}]`, `users: "U1" maps to "mallory"`},
		{"slack without signing secret", `
  slack: [{name: s, channel: C1, token: t}]`, "slack[0].signing_secret: required"},
		{"bad risk", `
  slack: [{name: s, channel: C1, token: t, signing_secret: s, route: {min_risk: severe}}]`, "route.min_risk"},
		{"bad pattern", `
  email: [{name: m, smtp: "h:25", from: a@b.c, to: [d@e.f], route: {capabilities: ["[a"]}}]`, "route.capabilities"},
		{"smtp without port", `
  email: [{name: m, smtp: "h", from: a@b.c, to: [d@e.f]}]`, "email[0].smtp"},
		{"password alone", `
  email: [{name: m, smtp: "h:25", from: a@b.c, to: [d@e.f], password: x}]`, "username and password go together"},
		{"escalations", `
  webhooks: [{name: a, url: "https://h.example", secret: "whsec_x"}]
  email: [{name: managers, smtp: "h:25", from: a@b.c, to: [m@e.f]}]
  escalations:
    - {name: pay, route: {capabilities: ["payments.*"]}, remind_after: 10m, escalate_after: 30m, escalate_to: [managers], deadline: 2h, at_deadline: deny, deny_reason: "Nobody decided within 2 hours."}
    - {name: rest, remind_after: 1h, deadline: 4h, at_deadline: expire}
  review_escalations:
    - {name: late, route: {profiles: [DORA]}, remind_after: 1m, escalate_after: 1h, escalate_to: [managers]}`, ""},
		{"escalation to an unknown channel", `
  escalations: [{name: e, escalate_after: 1m, escalate_to: [nobody]}]`, `escalations[0].escalate_to: "nobody" is not a configured channel`},
		{"escalation without a step", `
  escalations: [{name: e}]`, "escalations[0]: no step"},
		{"escalation steps out of order", `
  escalations: [{name: e, remind_after: 1h, deadline: 30m, at_deadline: expire}]`, "come due in order"},
		{"escalation name reused", `
  escalations: [{name: e, remind_after: 1h}, {name: e, remind_after: 1h}]`, "another escalation has it"},
		{"escalate_to without escalate_after", `
  webhooks: [{name: a, url: "https://h.example", secret: "whsec_x"}]
  escalations: [{name: e, remind_after: 1h, escalate_to: [a]}]`, "go together"},
		{"deny without a reason", `
  escalations: [{name: e, deadline: 1h, at_deadline: deny}]`, "deny_reason: required"},
		{"expire with a reason", `
  escalations: [{name: e, deadline: 1h, at_deadline: expire, deny_reason: x}]`, "deny_reason: only with"},
		{"deadline without at_deadline", `
  escalations: [{name: e, deadline: 1h}]`, "want expire or deny"},
		{"at_deadline without deadline", `
  escalations: [{name: e, remind_after: 1h, at_deadline: deny, deny_reason: x}]`, "need a deadline"},
		{"negative", `
  escalations: [{name: e, remind_after: -1h}]`, "negative"},
		{"review by risk", `
  review_escalations: [{name: r, remind_after: 1m, route: {min_risk: high}}]`, "a review has no risk level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			if err := c.Decode(strings.NewReader(notifyBase+tc.yaml), "test"); err != nil {
				t.Fatal(err)
			}
			err := c.Check()
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				n := c.Notifications
				if !n.Enabled() || len(n.Slack) > 0 && n.Slack[0].Users["U1"] != "alice" ||
					len(n.Escalations) > 0 && (n.Escalations[0].EscalateAfter != 30*time.Minute || n.Escalations[0].AtDeadline != "deny" ||
						n.ReviewEscalations[0].RemindAfter != time.Minute) {
					t.Fatalf("decoded %+v", c.Notifications)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "notifications."+tc.err) && !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Check: %v, want %q", err, tc.err)
			}
		})
	}
}

func TestSecret(t *testing.T) {
	t.Setenv("CUSTOS_TEST_SECRET", "s3cret")
	if v, err := Secret("env:CUSTOS_TEST_SECRET"); v != "s3cret" || err != nil {
		t.Fatalf("env: %q %v", v, err)
	}
	if _, err := Secret("env:CUSTOS_TEST_UNSET_SECRET"); err == nil {
		t.Fatal("an unset variable was accepted")
	}
	if v, err := Secret("literal"); v != "literal" || err != nil {
		t.Fatal(v, err)
	}
	if _, err := Secret("file:/nonexistent/secret"); err == nil {
		t.Fatal("a missing file was accepted")
	}
}
