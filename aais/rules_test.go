package aais

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

var ruleNow = time.Date(2026, 8, 30, 18, 1, 0, 0, time.UTC)

// baseAction is the action rule tests match against; tests change copies.
func baseAction() map[string]any {
	return map[string]any{
		"kind":    "process.exec",
		"name":    "shell.exec",
		"summary": "Run a check",
		"arguments": map[string]any{
			"command": "node --check a.js",
			"argv":    []any{"node", "--check", "a.js"},
			"n":       json.Number("1"),
			"opts":    map[string]any{"x": true, "y": []any{json.Number("1"), json.Number("2")}},
			"a/b":     "slash",
			"m~n":     "tilde",
			"url":     "https://example.com/v1/items",
		},
		"resource":          "/ws/proj/file.txt",
		"working_directory": "/ws/proj",
	}
}

var baseOrigin = Origin{Harness: "h1", SessionID: "s-1", Project: "/ws/proj"}

// newReq builds a request for action from origin, offering approve with
// scope session and persistent under constraints c (when c is not nil).
func newReq(t testing.TB, id string, origin Origin, action map[string]any, c Constraints) *Request {
	t.Helper()
	choices := []Choice{{Decision: Approve, Scope: ScopeOnce, Label: "Allow once"}}
	if c != nil {
		choices = append(choices,
			Choice{Decision: Approve, Scope: ScopeSession, Label: "Allow for the session", ScopeConstraints: c},
			Choice{Decision: Approve, Scope: ScopePersistent, Label: "Always allow", ScopeConstraints: c})
	}
	choices = append(choices, Choice{Decision: Deny, Scope: ScopeOnce, Label: "Deny"})
	req, err := NewRequest(RequestParams{
		ID: id, CreatedAt: ruleNow.Add(-time.Minute), Origin: origin, Action: action,
		Risk:    Risk{Level: RiskMedium, Reasons: []string{"test"}},
		Choices: choices,
	})
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	return req
}

func constraints(t testing.TB, s string) Constraints {
	t.Helper()
	var c Constraints
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		t.Fatalf("constraints %s: %v", s, err)
	}
	return c
}

// approval returns the decision and receipt approving req with scope.
func approval(t testing.TB, req *Request, scope Scope) (*Decision, *Resolution) {
	t.Helper()
	reviewer := Actor{ID: "alex", Type: ActorHuman, AuthenticatedBy: "test"}
	d, err := NewDecision(req, DecisionParams{ID: "dec_" + req.ID, Decision: Approve, Scope: scope, Actor: reviewer, DecidedAt: ruleNow})
	if err != nil {
		t.Fatalf("NewDecision: %v", err)
	}
	r, err := NewResolution(ResolutionParams{ID: "res_" + req.ID, Request: req, Decision: d, Outcome: OutcomeApproved, ResolvedAt: ruleNow})
	if err != nil {
		t.Fatalf("NewResolution: %v", err)
	}
	return d, r
}

func ruleFrom(t testing.TB, req *Request, scope Scope, id string) *Rule {
	t.Helper()
	d, res := approval(t, req, scope)
	r, err := NewRule(RuleParams{ID: id, Request: req, Decision: d, Resolution: res, Now: ruleNow})
	if err != nil {
		t.Fatalf("NewRule: %v", err)
	}
	return r
}

// ruleWith makes a persistent rule under constraints cjson.
func ruleWith(t testing.TB, cjson string) *Rule {
	t.Helper()
	return ruleFrom(t, newReq(t, "apr_origin", baseOrigin, baseAction(), constraints(t, cjson)), ScopePersistent, "rul_1")
}

func TestRuleConstraintKeys(t *testing.T) {
	digest := newReq(t, "apr_x", baseOrigin, baseAction(), nil).ActionDigest
	type edit func(a map[string]any, o *Origin)
	arg := func(k string, v any) edit {
		return func(a map[string]any, _ *Origin) { a["arguments"].(map[string]any)[k] = v }
	}
	member := func(k string, v any) edit {
		return func(a map[string]any, _ *Origin) {
			if v == nil {
				delete(a, k)
			} else {
				a[k] = v
			}
		}
	}
	tests := []struct {
		name   string
		c      string
		edit   edit
		want   bool
		reason string
	}{
		{"kind", `{"action_kind":"process.exec"}`, nil, true, ""},
		{"kind other", `{"action_kind":"process.exec"}`, member("kind", "tool.call"), false, "action_kind"},
		{"name", `{"action_name":"shell.exec"}`, nil, true, ""},
		{"name other", `{"action_name":"shell.exec"}`, member("name", "shell.execute"), false, "action_name"},
		{"name case", `{"action_name":"Shell.exec"}`, nil, false, "action_name"},
		{"resource", `{"action_name":"shell.exec","resource_prefix":"/ws/proj/"}`, nil, true, ""},
		{"resource other", `{"action_name":"shell.exec","resource_prefix":"/ws/proj/"}`, member("resource", "/ws/project2/x"), false, "resource_prefix"},
		{"resource sibling", `{"action_name":"shell.exec","resource_prefix":"/ws/proj/"}`, member("resource", "/ws/proj-evil/x"), false, "resource_prefix"},
		{"resource dotdot", `{"action_name":"shell.exec","resource_prefix":"/ws/proj/"}`, member("resource", "/ws/proj/../../etc/passwd"), false, `".."`},
		{"resource encoded dotdot", `{"action_name":"shell.exec","resource_prefix":"https://x/"}`, member("resource", "https://x/a/%2E%2e/b"), false, `".."`},
		{"resource backslash dotdot", `{"action_name":"shell.exec","resource_prefix":"C:\\ws\\"}`, member("resource", `C:\ws\..\win`), false, `".."`},
		{"resource absent", `{"action_name":"shell.exec","resource_prefix":"/ws/"}`, member("resource", nil), false, "resource_prefix"},
		{"wd", `{"action_name":"shell.exec","working_directory_prefix":"/ws/"}`, nil, true, ""},
		{"wd other", `{"action_name":"shell.exec","working_directory_prefix":"/ws/"}`, member("working_directory", "/tmp"), false, "working_directory_prefix"},
		{"wd dotdot", `{"action_name":"shell.exec","working_directory_prefix":"/ws/"}`, member("working_directory", "/ws/.."), false, "working_directory_prefix"},
		{"wd absent", `{"action_name":"shell.exec","working_directory_prefix":"/ws/"}`, member("working_directory", nil), false, "working_directory_prefix"},
		{"equals string", `{"action_name":"shell.exec","argument_equals":{"/command":"node --check a.js"}}`, nil, true, ""},
		{"equals string other", `{"action_name":"shell.exec","argument_equals":{"/command":"node --check a.js"}}`, arg("command", "node --check b.js"), false, "argument_equals"},
		{"equals number jcs", `{"action_name":"shell.exec","argument_equals":{"/n":1.0}}`, nil, true, ""},
		{"equals number other", `{"action_name":"shell.exec","argument_equals":{"/n":2}}`, nil, false, "argument_equals"},
		{"equals number vs string", `{"action_name":"shell.exec","argument_equals":{"/n":"1"}}`, nil, false, "argument_equals"},
		{"equals object order", `{"action_name":"shell.exec","argument_equals":{"/opts":{"y":[1,2],"x":true}}}`, nil, true, ""},
		{"equals object extra", `{"action_name":"shell.exec","argument_equals":{"/opts":{"x":true}}}`, nil, false, "argument_equals"},
		{"equals array element", `{"action_name":"shell.exec","argument_equals":{"/argv/2":"a.js","/opts/y/1":2}}`, nil, true, ""},
		{"equals escaped pointers", `{"action_name":"shell.exec","argument_equals":{"/a~1b":"slash","/m~0n":"tilde"}}`, nil, true, ""},
		{"equals whole arguments", `{"action_name":"shell.exec","argument_equals":{"":{"command":"x"}}}`, nil, false, "argument_equals"},
		{"equals missing", `{"action_name":"shell.exec","argument_equals":{"/nope":null}}`, nil, false, "no such argument"},
		{"equals null present", `{"action_name":"shell.exec","argument_equals":{"/z":null}}`, arg("z", nil), true, ""},
		{"equals index out of range", `{"action_name":"shell.exec","argument_equals":{"/argv/3":"x"}}`, nil, false, "no such argument"},
		{"equals index leading zero", `{"action_name":"shell.exec","argument_equals":{"/argv/01":"--check"}}`, nil, false, "no such argument"},
		{"equals index dash", `{"action_name":"shell.exec","argument_equals":{"/argv/-":"a.js"}}`, nil, false, "no such argument"},
		{"prefix", `{"action_name":"shell.exec","argument_prefix":{"/url":"https://example.com/"}}`, nil, true, ""},
		{"prefix other", `{"action_name":"shell.exec","argument_prefix":{"/url":"https://example.com/"}}`, arg("url", "https://example.com.evil/"), false, "argument_prefix"},
		{"prefix not string", `{"action_name":"shell.exec","argument_prefix":{"/n":"1"}}`, nil, false, "not a string"},
		{"prefix missing", `{"action_name":"shell.exec","argument_prefix":{"/nope":"x"}}`, nil, false, "no such argument"},
		{"glob", `{"action_name":"shell.exec","argument_glob":{"/argv/2":"*.js"}}`, nil, true, ""},
		{"glob question", `{"action_name":"shell.exec","argument_glob":{"/argv/2":"?.js"}}`, nil, true, ""},
		{"glob other", `{"action_name":"shell.exec","argument_glob":{"/argv/2":"*.ts"}}`, nil, false, "argument_glob"},
		{"glob star not slash", `{"action_name":"shell.exec","argument_glob":{"/argv/2":"*.js"}}`, func(a map[string]any, _ *Origin) {
			a["arguments"].(map[string]any)["argv"] = []any{"node", "--check", "../x.js"}
		}, false, "argument_glob"},
		{"glob not string", `{"action_name":"shell.exec","argument_glob":{"/opts":"*"}}`, nil, false, "not a string"},
		{"command prefix", `{"action_name":"shell.exec","command_prefix":"node --check "}`, nil, true, ""},
		{"command prefix other", `{"action_name":"shell.exec","command_prefix":"node --check "}`, arg("command", "rm -rf /"), false, "command_prefix"},
		{"command prefix chained", `{"action_name":"shell.exec","command_prefix":"node --check "}`, arg("command", "node --check a.js; rm -rf /"), false, "metacharacter"},
		{"command prefix and", `{"action_name":"shell.exec","command_prefix":"node --check "}`, arg("command", "node --check a.js && curl x"), false, "metacharacter"},
		{"command prefix subst", `{"action_name":"shell.exec","command_prefix":"node --check "}`, arg("command", "node --check $(id)"), false, "metacharacter"},
		{"command prefix newline", `{"action_name":"shell.exec","command_prefix":"node --check "}`, arg("command", "node --check a.js\nrm -rf /"), false, "metacharacter"},
		{"command prefix not string", `{"action_name":"shell.exec","command_prefix":"node --check "}`, arg("command", []any{"node"}), false, "not a string"},
		{"command prefix missing", `{"action_name":"shell.exec","command_prefix":"node --check "}`, func(a map[string]any, _ *Origin) {
			delete(a["arguments"].(map[string]any), "command")
		}, false, "no such argument"},
		{"digest", `{"action_digest":"` + digest + `"}`, nil, true, ""},
		{"digest other", `{"action_digest":"` + digest + `"}`, arg("command", "node --check  a.js"), false, "action_digest"},
		{"origin harness", `{"action_name":"shell.exec","origin_harness":"h1"}`, nil, true, ""},
		{"origin harness other", `{"action_name":"shell.exec","origin_harness":"h1"}`, func(_ map[string]any, o *Origin) { o.Harness = "h2" }, false, "origin_harness"},
		{"origin session", `{"action_name":"shell.exec","origin_session":"s-1"}`, nil, true, ""},
		{"origin session other", `{"action_name":"shell.exec","origin_session":"s-1"}`, func(_ map[string]any, o *Origin) { o.SessionID = "s-2" }, false, "origin_session"},
		{"origin project", `{"action_name":"shell.exec","origin_project":"/ws/proj"}`, nil, true, ""},
		{"origin project absent", `{"action_name":"shell.exec","origin_project":"/ws/proj"}`, func(_ map[string]any, o *Origin) { o.Project = "" }, false, "origin_project"},
		{"expires later", `{"action_name":"shell.exec","expires_at":"2026-08-30T20:01:00+01:00"}`, nil, false, "expired"},
		{"expires in future", `{"action_name":"shell.exec","expires_at":"2026-08-30T19:00:00Z"}`, nil, true, ""},
		{"all together", `{"action_kind":"process.exec","action_name":"shell.exec","resource_prefix":"/ws/","working_directory_prefix":"/ws/proj","argument_equals":{"/argv/0":"node"},"argument_prefix":{"/argv/1":"--"},"argument_glob":{"/argv/2":"*.js"},"command_prefix":"node ","origin_session":"s-1","origin_harness":"h1","expires_at":"2027-01-01T00:00:00Z"}`, nil, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r *Rule
			if tt.name == "expires later" {
				// Created in the past so the rule is not refused as already
				// expired; evaluated at ruleNow+1h, the expiry instant.
				r = ruleWith(t, tt.c)
				ok, why := r.Matches(newReq(t, "apr_y", baseOrigin, baseAction(), nil), ruleNow.Add(time.Hour))
				if ok || !strings.Contains(why, tt.reason) {
					t.Fatalf("Matches = %v, %q", ok, why)
				}
				return
			}
			r = ruleWith(t, tt.c)
			a, o := baseAction(), baseOrigin
			if tt.edit != nil {
				tt.edit(a, &o)
			}
			ok, why := r.Matches(newReq(t, "apr_y", o, a, nil), ruleNow)
			if ok != tt.want {
				t.Fatalf("Matches = %v (%q), want %v", ok, why, tt.want)
			}
			if ok && why != "" {
				t.Errorf("match with reason %q", why)
			}
			if !ok && !strings.Contains(why, tt.reason) {
				t.Errorf("reason %q does not mention %q", why, tt.reason)
			}
		})
	}
}

func TestRuleReasonsDoNotQuoteValues(t *testing.T) {
	r := ruleWith(t, `{"action_name":"shell.exec","command_prefix":"node --check ","argument_equals":{"/argv/0":"node"}}`)
	a := baseAction()
	a["arguments"].(map[string]any)["argv"] = []any{"SECRET-TOKEN"}
	_, why := r.Matches(newReq(t, "apr_y", baseOrigin, a, nil), ruleNow)
	if why == "" || strings.Contains(why, "SECRET") {
		t.Fatalf("reason %q", why)
	}
}

func TestRuleUnknownKeyFailsClosed(t *testing.T) {
	r := ruleWith(t, `{"action_name":"shell.exec","path_prefix":"/ws/","zz":1}`)
	ok, why := r.Matches(newReq(t, "apr_y", baseOrigin, baseAction(), nil), ruleNow)
	if ok || !strings.Contains(why, "unknown constraint path_prefix, zz") {
		t.Fatalf("Matches = %v, %q", ok, why)
	}
	cs, _ := r.Parsed()
	if fmt.Sprint(cs.Unknown) != "[path_prefix zz]" {
		t.Errorf("Unknown = %v", cs.Unknown)
	}
	if r.Active(ruleNow) {
		t.Error("a rule with unknown constraints is reported active")
	}
	if m := (RuleSet{r}).Match(newReq(t, "apr_y", baseOrigin, baseAction(), nil), ruleNow); m != nil {
		t.Error("RuleSet matched a rule with an unknown constraint")
	}
}

func TestRuleMalformedConstraints(t *testing.T) {
	for _, c := range []string{
		`{"action_name":""}`,
		`{"action_name":1}`,
		`{"action_name":null}`,
		`{"action_name":["shell.exec"]}`,
		`{"action_kind":true}`,
		`{"action_name":"x","resource_prefix":""}`,
		`{"action_name":"x","working_directory_prefix":{}}`,
		`{"action_digest":"sha256:abc"}`,
		`{"action_digest":"sha256:157F438A55CE7DB6AA61C8515F0B48CE2851B9BAD6C5B67BB3EB34FF353FD9D8"}`,
		`{"action_name":"x","expires_at":"2026-08-30 19:00:00Z"}`,
		`{"action_name":"x","expires_at":"2026-08-30T19:00:00"}`,
		`{"action_name":"x","expires_at":1798761600}`,
		`{"action_name":"x","argument_equals":{}}`,
		`{"action_name":"x","argument_equals":[]}`,
		`{"action_name":"x","argument_equals":{"command":"x"}}`,
		`{"action_name":"x","argument_equals":{"/a~2":"x"}}`,
		`{"action_name":"x","argument_equals":{"/a~":"x"}}`,
		`{"action_name":"x","argument_prefix":{"/a":1}}`,
		`{"action_name":"x","argument_prefix":{"/a":""}}`,
		`{"action_name":"x","argument_prefix":"node"}`,
		`{"action_name":"x","argument_glob":{"/a":"[a-"}}`,
		`{"action_name":"x","argument_glob":{"/a":"a\\"}}`,
		`{"action_name":"x","command_prefix":""}`,
		`{"action_name":"x","origin_session":7}`,
		`{"action_name":"x","origin_harness":""}`,
		`{"action_name":"x","origin_project":false}`,
	} {
		t.Run(c, func(t *testing.T) {
			req := newReq(t, "apr_m", baseOrigin, baseAction(), constraints(t, c))
			d, res := approval(t, req, ScopePersistent)
			_, err := NewRule(RuleParams{Request: req, Decision: d, Resolution: res, Now: ruleNow})
			if !errors.Is(err, ErrRule) || !errors.Is(err, ErrConstraint) {
				t.Fatalf("NewRule error %v, want ErrRule and ErrConstraint", err)
			}
			if _, err := ParseConstraints(constraints(t, c)); !errors.Is(err, ErrConstraint) {
				t.Fatalf("ParseConstraints error %v", err)
			}
		})
	}
	if _, err := ParseConstraints(nil); !errors.Is(err, ErrConstraint) {
		t.Errorf("ParseConstraints(nil) = %v", err)
	}
	// A raw value that is not strict JSON (only possible when built in Go).
	if _, err := ParseConstraints(Constraints{"action_name": json.RawMessage(`"a`)}); !errors.Is(err, ErrConstraint) {
		t.Errorf("bad JSON accepted: %v", err)
	}
	if _, err := ParseConstraints(Constraints{"argument_equals": json.RawMessage(`{"/a":1,"/a":2}`)}); !errors.Is(err, ErrConstraint) {
		t.Errorf("duplicate member accepted: %v", err)
	}
}

func TestNewRuleRefusals(t *testing.T) {
	c := constraints(t, `{"action_name":"shell.exec"}`)
	req := newReq(t, "apr_r", baseOrigin, baseAction(), c)
	d, res := approval(t, req, ScopeSession)
	good := RuleParams{Request: req, Decision: d, Resolution: res, Now: ruleNow}
	if _, err := NewRule(good); err != nil {
		t.Fatalf("good params refused: %v", err)
	}
	dOnce, resOnce := approval(t, req, ScopeOnce)
	denyD, err := NewDecision(req, DecisionParams{ID: "dec_deny", Decision: Deny, Scope: ScopeOnce, Actor: Actor{ID: "a", Type: ActorHuman}, DecidedAt: ruleNow})
	if err != nil {
		t.Fatal(err)
	}
	denyRes, err := NewResolution(ResolutionParams{Request: req, Decision: denyD, Outcome: OutcomeDenied, ResolvedAt: ruleNow})
	if err != nil {
		t.Fatal(err)
	}
	staleRes := *res
	staleRes.Outcome, staleRes.EffectiveScope = OutcomeStale, ""
	wrongDigest := *d
	wrongDigest.ActionDigest = "sha256:" + strings.Repeat("0", 64)
	otherReq := newReq(t, "apr_other", baseOrigin, baseAction(), c)
	noConstraints := *req
	noConstraints.Choices = append([]Choice(nil), req.Choices...)
	for i := range noConstraints.Choices {
		noConstraints.Choices[i].ScopeConstraints = nil
	}
	notNarrow := newReq(t, "apr_r", baseOrigin, baseAction(), constraints(t, `{"origin_session":"s-1","expires_at":"2027-01-01T00:00:00Z"}`))
	nd, nres := approval(t, notNarrow, ScopeSession)
	noSession := *req
	noSession.Origin.SessionID = ""
	expired := newReq(t, "apr_r", baseOrigin, baseAction(), constraints(t, `{"action_name":"shell.exec","expires_at":"2026-08-30T18:01:00Z"}`))
	ed, eres := approval(t, expired, ScopeSession)
	mutate := func(f func(p *RuleParams)) RuleParams { p := good; f(&p); return p }
	for name, p := range map[string]RuleParams{
		"nil request":         mutate(func(p *RuleParams) { p.Request = nil }),
		"nil decision":        mutate(func(p *RuleParams) { p.Decision = nil }),
		"nil resolution":      mutate(func(p *RuleParams) { p.Resolution = nil }),
		"zero now":            mutate(func(p *RuleParams) { p.Now = time.Time{} }),
		"once":                {Request: req, Decision: dOnce, Resolution: resOnce, Now: ruleNow},
		"denied":              {Request: req, Decision: denyD, Resolution: denyRes, Now: ruleNow},
		"not approved":        mutate(func(p *RuleParams) { p.Resolution = &staleRes }),
		"scope mismatch":      mutate(func(p *RuleParams) { p.Decision = dOnce }),
		"other request":       mutate(func(p *RuleParams) { p.Request = otherReq }),
		"digest differs":      mutate(func(p *RuleParams) { p.Decision = &wrongDigest }),
		"missing constraints": mutate(func(p *RuleParams) { p.Request = &noConstraints }),
		"not narrowing":       {Request: notNarrow, Decision: nd, Resolution: nres, Now: ruleNow},
		"session w/o session": mutate(func(p *RuleParams) { p.Request = &noSession }),
		"already expired":     {Request: expired, Decision: ed, Resolution: eres, Now: ruleNow},
		"cap already passed":  mutate(func(p *RuleParams) { p.ExpiresAt = ruleNow }),
		"bad id":              mutate(func(p *RuleParams) { p.ID = "rule 1" }),
		"decision not cause":  mutate(func(p *RuleParams) { r := *res; r.DecisionID = "dec_other"; p.Resolution = &r }),
	} {
		r, err := NewRule(p)
		t.Logf("%s: %v", name, err)
		if !errors.Is(err, ErrRule) {
			t.Errorf("%s: NewRule = %v, %v; want ErrRule", name, r, err)
		}
	}
}

func TestRuleGeneratedID(t *testing.T) {
	req := newReq(t, "apr_g", baseOrigin, baseAction(), constraints(t, `{"action_name":"shell.exec"}`))
	d, res := approval(t, req, ScopePersistent)
	r, err := (&Options{Rand: &seqReader{}}).NewRule(RuleParams{Request: req, Decision: d, Resolution: res, Now: ruleNow})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "rul_000102030405060708090a0b0c0d0e0f" {
		t.Errorf("ID = %s", r.ID)
	}
	if r.RequestID != "apr_g" || r.DecisionID != d.ID || r.ResolutionID != res.ID || r.ActionDigest != req.ActionDigest ||
		r.Actor.ID != "alex" || r.Scope != ScopePersistent || !r.CreatedAt.Equal(ruleNow) || !r.ExpiresAt.IsZero() {
		t.Errorf("rule %+v", r)
	}
}

func TestRuleSessionBinding(t *testing.T) {
	c := constraints(t, `{"action_name":"shell.exec"}`)
	src := newReq(t, "apr_s", baseOrigin, baseAction(), c)
	session := ruleFrom(t, src, ScopeSession, "rul_s")
	persistent := ruleFrom(t, src, ScopePersistent, "rul_p")
	for _, tt := range []struct {
		name          string
		origin        Origin
		wantSession   bool
		wantPersisted bool
	}{
		{"same session", Origin{Harness: "h1", SessionID: "s-1", RunID: "r-9"}, true, true},
		{"other session", Origin{Harness: "h1", SessionID: "s-2"}, false, true},
		{"same session id other harness", Origin{Harness: "h2", SessionID: "s-1"}, false, true},
	} {
		req := newReq(t, "apr_t", tt.origin, baseAction(), nil)
		if ok, why := session.Matches(req, ruleNow); ok != tt.wantSession {
			t.Errorf("%s: session rule Matches = %v (%q)", tt.name, ok, why)
		} else if !ok && !strings.Contains(why, "session") {
			t.Errorf("%s: reason %q", tt.name, why)
		}
		if ok, why := persistent.Matches(req, ruleNow); ok != tt.wantPersisted {
			t.Errorf("%s: persistent rule Matches = %v (%q)", tt.name, ok, why)
		}
	}
	// Changing the exported scope does not unbind a rule by accident:
	// an invalid scope never matches.
	broken := session.Clone()
	broken.Scope = ScopeOnce
	if ok, _ := broken.Matches(newReq(t, "apr_t", baseOrigin, baseAction(), nil), ruleNow); ok {
		t.Error("a rule with scope once matched")
	}
}

func TestRuleExpiryBoundaries(t *testing.T) {
	exp := ruleNow.Add(time.Hour)
	r := ruleWith(t, `{"action_name":"shell.exec","expires_at":"`+exp.Format(time.RFC3339)+`"}`)
	if !r.ExpiresAt.Equal(exp) {
		t.Fatalf("ExpiresAt = %v", r.ExpiresAt)
	}
	req := newReq(t, "apr_e", baseOrigin, baseAction(), nil)
	for _, tt := range []struct {
		at   time.Time
		want bool
	}{
		{ruleNow, true},
		{exp.Add(-time.Nanosecond), true},
		{exp, false},
		{exp.Add(time.Nanosecond), false},
		{exp.Add(24 * time.Hour), false},
		{time.Time{}, false},
	} {
		if ok, why := r.Matches(req, tt.at); ok != tt.want {
			t.Errorf("at %v: Matches = %v (%q), want %v", tt.at, ok, why, tt.want)
		}
		if got := r.Active(tt.at) && !tt.at.IsZero(); got != tt.want {
			t.Errorf("at %v: Active = %v", tt.at, got)
		}
	}
	// Moving the exported ExpiresAt later does not extend the constraint.
	longer := r.Clone()
	longer.ExpiresAt = exp.Add(48 * time.Hour)
	if ok, why := longer.Matches(req, exp); ok || !strings.Contains(why, "expires_at") {
		t.Errorf("extended rule: Matches = %v (%q)", ok, why)
	}

	// The authority's cap applies when it is earlier than the constraint,
	// and the constraint when it is earlier than the cap.
	src := newReq(t, "apr_c", baseOrigin, baseAction(), constraints(t, `{"action_name":"shell.exec","expires_at":"`+exp.Format(time.RFC3339)+`"}`))
	d, res := approval(t, src, ScopePersistent)
	for _, cap := range []time.Time{ruleNow.Add(time.Minute), exp.Add(time.Hour)} {
		r, err := NewRule(RuleParams{Request: src, Decision: d, Resolution: res, Now: ruleNow, ExpiresAt: cap})
		if err != nil {
			t.Fatal(err)
		}
		want := exp
		if cap.Before(exp) {
			want = cap
		}
		if !r.ExpiresAt.Equal(want) {
			t.Errorf("cap %v: ExpiresAt = %v, want %v", cap, r.ExpiresAt, want)
		}
		if ok, _ := r.Matches(req, want); ok {
			t.Errorf("cap %v: matched at the expiry instant", cap)
		}
		if ok, _ := r.Matches(req, want.Add(-time.Nanosecond)); !ok {
			t.Errorf("cap %v: no match just before expiry", cap)
		}
	}
}

func TestRuleDigestPin(t *testing.T) {
	src := newReq(t, "apr_d", baseOrigin, baseAction(), nil)
	r := ruleWith(t, `{"action_digest":"`+src.ActionDigest+`"}`)
	same := newReq(t, "apr_same", Origin{Harness: "h9", SessionID: "s-9"}, baseAction(), nil)
	if ok, why := r.Matches(same, ruleNow); !ok {
		t.Fatalf("pinned action did not match: %s", why)
	}
	a := baseAction()
	a["summary"] = "Run a check (again)"
	if ok, _ := r.Matches(newReq(t, "apr_diff", baseOrigin, a, nil), ruleNow); ok {
		t.Error("a different action matched the digest pin")
	}
	// The digest is recomputed from the action, not read from the request.
	lying := *same
	lying.Action = newReq(t, "apr_z", baseOrigin, a, nil).Action
	if ok, _ := r.Matches(&lying, ruleNow); ok {
		t.Error("a request declaring the pinned digest over another action matched")
	}
}

// The upstream fixture offers a session choice limited to shell.exec
// commands starting with "node --check ".
func TestRuleFixtureSessionChoice(t *testing.T) {
	req := fixtureRequest(t)
	r := ruleFrom(t, req, ScopeSession, "rul_fixture")
	if r.Origin.SessionID != "s-1" || r.ActionDigest != fixtureDigest {
		t.Fatalf("rule %+v", r)
	}
	next := func(command string, origin Origin) *Request {
		a := doc(t, requestFixture)["request"].(map[string]any)["action"].(map[string]any)
		a["arguments"] = map[string]any{"command": command}
		return newReq(t, "apr_next", origin, a, nil)
	}
	o := req.Origin
	if ok, why := r.Matches(req, ruleNow); !ok {
		t.Errorf("the approved request itself: %s", why)
	}
	if ok, why := r.Matches(next("node --check other.js", o), ruleNow); !ok {
		t.Errorf("node --check other.js: %s", why)
	}
	for _, cmd := range []string{"rm -rf /", "node --check other.js; rm -rf /", "node --check `rm -rf /`", "node --checkx", "node  --check a.js"} {
		if ok, _ := r.Matches(next(cmd, o), ruleNow); ok {
			t.Errorf("%q matched", cmd)
		}
	}
	other := o
	other.SessionID = "s-2"
	if ok, _ := r.Matches(next("node --check other.js", other), ruleNow); ok {
		t.Error("matched in another session")
	}
}

func TestRuleSetOrderAndRevoke(t *testing.T) {
	c := constraints(t, `{"action_name":"shell.exec"}`)
	mk := func(id string, at time.Time) *Rule {
		req := newReq(t, "apr_"+id, baseOrigin, baseAction(), c)
		d, res := approval(t, req, ScopePersistent)
		r, err := NewRule(RuleParams{ID: id, Request: req, Decision: d, Resolution: res, Now: at})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	older := mk("rul_b", ruleNow.Add(-2*time.Hour))
	tieA := mk("rul_a", ruleNow.Add(-time.Hour))
	tieC := mk("rul_c", ruleNow.Add(-time.Hour))
	narrow := ruleWith(t, `{"action_name":"fs.write"}`)
	narrow.CreatedAt = ruleNow.Add(-3 * time.Hour)
	set := RuleSet{tieC, nil, tieA, narrow, older}
	req := newReq(t, "apr_q", baseOrigin, baseAction(), nil)

	if got := set.Match(req, ruleNow); got != older {
		t.Fatalf("Match = %v, want the oldest matching rule", got)
	}
	var ids []string
	for _, r := range set.Sorted() {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != "rul_1,rul_b,rul_a,rul_c" {
		t.Errorf("Sorted = %v", ids)
	}
	ex := set.Explain(req, ruleNow)
	if len(ex) != 4 || ex[0].Matched || !strings.Contains(ex[0].Reason, "action_name") || !ex[1].Matched || ex[1].Reason != "" {
		t.Errorf("Explain = %+v", ex)
	}
	if set.Get("rul_a") != tieA || set.Get("nope") != nil {
		t.Error("Get")
	}

	revAt := ruleNow.Add(time.Minute)
	admin := Actor{ID: "admin", Type: ActorHuman}
	revoked, err := set.Revoke("rul_b", revAt, admin)
	if err != nil {
		t.Fatal(err)
	}
	if older.Revoked() || set[4] != older {
		t.Fatal("Revoke changed the original set")
	}
	rb := revoked.Get("rul_b")
	if !rb.Revoked() || !rb.RevokedAt.Equal(revAt) || rb.RevokedBy != admin {
		t.Fatalf("revoked rule %+v", rb)
	}
	if ok, why := rb.Matches(req, revAt); ok || !strings.Contains(why, "revoked") {
		t.Errorf("revoked rule Matches = %v (%q)", ok, why)
	}
	// A revoked rule matches even before its revocation time? No: revoked
	// is revoked, whatever the clock says.
	if ok, _ := rb.Matches(req, ruleNow); ok {
		t.Error("revoked rule matched before its revocation instant")
	}
	if got := revoked.Match(req, revAt); got == nil || got.ID != "rul_a" {
		t.Errorf("after revocation Match = %v, want rul_a (tie broken by id)", got)
	}
	if n := len(revoked.Active(revAt)); n != 3 {
		t.Errorf("Active = %d rules", n)
	}
	again, err := revoked.Revoke("rul_b", revAt.Add(time.Hour), Actor{ID: "other", Type: ActorHuman})
	if err != nil || !again.Get("rul_b").RevokedAt.Equal(revAt) || again.Get("rul_b").RevokedBy != admin {
		t.Errorf("second revocation changed the first: %v", err)
	}
	if _, err := set.Revoke("rul_zz", revAt, admin); !errors.Is(err, ErrUnknownRule) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := set.Revoke("rul_a", time.Time{}, admin); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero time: %v", err)
	}
	if got := (RuleSet{}).Match(req, ruleNow); got != nil {
		t.Error("empty set matched")
	}
}

func TestRuleNotBuiltNeverMatches(t *testing.T) {
	req := newReq(t, "apr_n", baseOrigin, baseAction(), nil)
	for _, r := range []*Rule{nil, {}, {ID: "rul_x", Scope: ScopePersistent, CreatedAt: ruleNow}} {
		if ok, _ := r.Matches(req, ruleNow); ok {
			t.Errorf("%+v matched", r)
		}
	}
	if _, err := json.Marshal(Rule{}); err == nil {
		t.Error("a zero Rule marshalled")
	}
	r := ruleWith(t, `{"action_name":"shell.exec"}`)
	if ok, _ := r.Matches(nil, ruleNow); ok {
		t.Error("nil request matched")
	}
	var zero Request
	if ok, _ := r.Matches(&zero, ruleNow); ok {
		t.Error("empty request matched")
	}
}

func TestRuleJSONRoundTrip(t *testing.T) {
	src := newReq(t, "apr_j", baseOrigin, baseAction(), constraints(t, `{"action_name":"shell.exec","argument_glob":{"/argv/2":"*.js"},"expires_at":"2027-01-01T00:00:00+01:00"}`))
	r := ruleFrom(t, src, ScopeSession, "rul_j")
	r, _ = r.Revoke(ruleNow.Add(time.Minute), Actor{ID: "admin", Type: ActorHuman})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Rule
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	b2, err := json.Marshal(&back)
	if err != nil || string(b) != string(b2) {
		t.Fatalf("round trip changed the rule: %v\n%s\n%s", err, b, b2)
	}
	if !back.Revoked() || back.Scope != ScopeSession || back.Origin != r.Origin {
		t.Errorf("back %+v", back)
	}
	if ok, why := back.Matches(newReq(t, "apr_k", baseOrigin, baseAction(), nil), ruleNow); ok || !strings.Contains(why, "revoked") {
		t.Errorf("Matches = %v (%q)", ok, why)
	}
	live := ruleFrom(t, src, ScopeSession, "rul_live")
	b, _ = json.Marshal(live)
	var liveBack Rule
	if err := json.Unmarshal(b, &liveBack); err != nil {
		t.Fatal(err)
	}
	if ok, why := liveBack.Matches(newReq(t, "apr_k", baseOrigin, baseAction(), nil), ruleNow); !ok {
		t.Errorf("decoded rule does not match: %s", why)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for name, edit := range map[string]func(map[string]any){
		"unknown member": func(m map[string]any) { m["wildcard"] = true },
		"once scope":     func(m map[string]any) { m["scope"] = "once" },
		"bad id":         func(m map[string]any) { m["id"] = "" },
		"no created_at":  func(m map[string]any) { delete(m, "created_at") },
		"bad constraint": func(m map[string]any) { m["scope_constraints"] = map[string]any{"action_name": 1} },
		"no constraints": func(m map[string]any) { delete(m, "scope_constraints") },
		"broad":          func(m map[string]any) { m["scope_constraints"] = map[string]any{"origin_session": "s-1"} },
		"no session":     func(m map[string]any) { m["origin"] = map[string]any{"harness": "h1", "session_id": ""} },
	} {
		c := map[string]any{}
		for k, v := range m {
			c[k] = v
		}
		edit(c)
		var x Rule
		if err := json.Unmarshal(encodeDoc(t, c), &x); !errors.Is(err, ErrRule) {
			t.Errorf("%s: Unmarshal = %v", name, err)
		}
	}
	var x Rule
	if err := x.UnmarshalJSON([]byte(`{"id":"a","id":"b"}`)); !errors.Is(err, ErrRule) {
		t.Errorf("duplicate member: %v", err)
	}
}

func TestRuleAccessorsCopy(t *testing.T) {
	r := ruleWith(t, `{"action_name":"shell.exec","argument_equals":{"/argv/0":"node"},"argument_prefix":{"/command":"node"},"argument_glob":{"/argv/2":"*"}}`)
	c := r.Constraints()
	c["action_name"] = json.RawMessage(`"other"`)
	cs, ok := r.Parsed()
	if !ok {
		t.Fatal("Parsed not ok")
	}
	cs.ArgumentEquals["/argv/0"] = json.RawMessage(`"x"`)
	cs.ArgumentPrefix["/command"] = "x"
	cs.ArgumentGlob["/argv/2"] = "x"
	cl := r.Clone()
	cl.Constraints()["action_name"][0] = 'x'
	if ok, why := r.Matches(newReq(t, "apr_y", baseOrigin, baseAction(), nil), ruleNow); !ok {
		t.Fatalf("rule changed through a copy: %s", why)
	}
	if string(r.Constraints()["action_name"]) != `"shell.exec"` {
		t.Error("constraints changed")
	}
}

// FuzzParseConstraints: parsing any scope_constraints object never panics,
// refuses only with ErrConstraint, and a parsed set can be matched against
// the fixture request without panicking.
func FuzzParseConstraints(f *testing.F) {
	for _, s := range []string{
		`{"action_name":"shell.exec","command_prefix":"node --check "}`,
		`{"action_kind":"process.exec","argument_equals":{"/command":"node --check script.js","":{"command":"x"}}}`,
		`{"action_name":"x","argument_glob":{"/a/0":"[a-z]*?"},"argument_prefix":{"/~0~1":"p"}}`,
		`{"action_digest":"` + fixtureDigest + `","expires_at":"2026-08-30T18:05:00+00:30"}`,
		`{"resource_prefix":"/ws/","working_directory_prefix":"/workspace/","origin_session":"s-1","unknown":[1,{"a":null}]}`,
		`{"argument_equals":{"/argv/01":1e400}}`,
		`{}`, `[]`, `{"a":`,
	} {
		f.Add([]byte(s))
	}
	req := mustParse(f, readFile(f, requestFixture)).Request
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Constraints
		if err := json.Unmarshal(data, &c); err != nil {
			return
		}
		cs, err := ParseConstraints(c)
		if err != nil {
			if !errors.Is(err, ErrConstraint) {
				t.Fatalf("error %v does not wrap ErrConstraint", err)
			}
			return
		}
		ok, why := cs.Matches(req, ruleNow)
		if ok == (why != "") {
			t.Fatalf("Matches = %v with reason %q", ok, why)
		}
		if ok && len(cs.Unknown) > 0 {
			t.Fatalf("matched with unknown keys %v", cs.Unknown)
		}
	})
}

// A reviewer approves the upstream fixture's session choice; the saved rule
// then covers other syntax checks in the same session and nothing else.
func ExampleNewRule() {
	b, err := os.ReadFile("testdata/shell-approval.json")
	if err != nil {
		panic(err)
	}
	m, err := Parse(b)
	if err != nil {
		panic(err)
	}
	req := m.Request
	now := req.CreatedAt.Time().Add(time.Minute)
	reviewer := Actor{ID: "alex", Type: ActorHuman, AuthenticatedBy: "local-session"}
	dec, err := NewDecision(req, DecisionParams{ID: "dec_1", Decision: Approve, Scope: ScopeSession, Actor: reviewer, DecidedAt: now})
	if err != nil {
		panic(err)
	}
	receipt, err := NewResolution(ResolutionParams{ID: "res_1", Request: req, Decision: dec, Outcome: OutcomeApproved, ResolvedAt: now})
	if err != nil {
		panic(err)
	}
	rule, err := NewRule(RuleParams{ID: "rul_1", Request: req, Decision: dec, Resolution: receipt, Now: now})
	if err != nil {
		panic(err)
	}
	fmt.Println(rule.ID, rule.Scope, rule.Origin.SessionID)

	ask := func(command string) *Request {
		action := json.RawMessage(`{"kind":"process.exec","name":"shell.exec","summary":"Run a command","arguments":{"command":` + fmt.Sprintf("%q", command) + `}}`)
		r, err := NewRequest(RequestParams{
			ID: "apr_2", CreatedAt: now, Origin: req.Origin, Action: action,
			Risk:    Risk{Level: RiskMedium, Reasons: []string{"Executes a local process"}},
			Choices: []Choice{{Decision: Approve, Scope: ScopeOnce, Label: "Allow"}, {Decision: Deny, Scope: ScopeOnce, Label: "Deny"}},
		})
		if err != nil {
			panic(err)
		}
		return r
	}
	rules := RuleSet{rule}
	for _, cmd := range []string{"node --check other.js", "rm -rf /", "node --check a.js; rm -rf /"} {
		if r := rules.Match(ask(cmd), now); r != nil {
			fmt.Printf("%q: approved by %s\n", cmd, r.ID)
		} else {
			_, why := rule.Matches(ask(cmd), now)
			fmt.Printf("%q: ask the reviewer (%s)\n", cmd, why)
		}
	}
	// Output:
	// rul_1 session s-1
	// "node --check other.js": approved by rul_1
	// "rm -rf /": ask the reviewer (command_prefix: the command does not start with the prefix)
	// "node --check a.js; rm -rf /": ask the reviewer (command_prefix: a shell metacharacter follows the prefix)
}
