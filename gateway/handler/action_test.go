package handler_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway/handler"
)

// goldenCall and goldenDescriptor are the fixed inputs of the known-answer
// test. The arguments deliberately have whitespace and unsorted members.
var (
	goldenCall = handler.Call{
		Capability:  "billing.invoice.create",
		PayloadType: "com.example.billing/invoice-create",
		Args:        json.RawMessage(`{"amount": "12.50", "currency":"EUR", "lines":[{"sku":"A-1","qty":2}]}`),
		From:        "agent:com.example.alice",
		To:          "agent:com.example.billing",
	}
	goldenDescriptor = handler.Descriptor{
		Kind:     "http.request",
		Resource: "https://billing.example/invoices",
		Effects:  []string{"Sends the arguments to billing.example"},
		Risk:     aais.RiskMedium,
	}
)

const (
	// goldenAction is what Action must write for the golden inputs.
	goldenAction = `{"kind":"http.request","name":"billing.invoice.create",` +
		`"summary":"billing.invoice.create (http.request) on https://billing.example/invoices",` +
		`"arguments":{"amount":"12.50","currency":"EUR","lines":[{"sku":"A-1","qty":2}]},` +
		`"resource":"https://billing.example/invoices","effects":["Sends the arguments to billing.example"]}`
	// goldenDigest is sha256 of the RFC 8785 form of goldenAction, computed
	// independently (Python hashlib over the hand-sorted canonical text).
	goldenDigest = "sha256:c811ac07a60b3b945f9e86d142cd69eff021ad25b11e3944ab8b4a83581d2111"
)

func TestActionGolden(t *testing.T) {
	action, digest, err := handler.Action(goldenCall, goldenDescriptor)
	if err != nil {
		t.Fatal(err)
	}
	if string(action) != goldenAction {
		t.Errorf("action:\n got %s\nwant %s", action, goldenAction)
	}
	if digest != goldenDigest {
		t.Errorf("digest = %s, want %s", digest, goldenDigest)
	}
	again, err := aais.ActionDigest(action)
	if err != nil || again != digest {
		t.Errorf("aais.ActionDigest = %s, %v; want %s", again, err, digest)
	}
}

func TestActionDeterministic(t *testing.T) {
	a1, d1, err := handler.Action(goldenCall, goldenDescriptor)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		d := goldenDescriptor
		d.Effects = append([]string(nil), d.Effects...)
		a2, d2, err := handler.Action(goldenCall, d)
		if err != nil || !bytes.Equal(a1, a2) || d1 != d2 {
			t.Fatalf("second run differs: %s %s %v", a2, d2, err)
		}
	}
	// Fields that are not part of the action do not change it.
	c := goldenCall
	c.From, c.MessageID, c.TraceID, c.PayloadType = "agent:com.example.eve", "m-2", strings.Repeat("a", 32), "x.y"
	d := goldenDescriptor
	d.Risk, d.RiskReasons = aais.RiskCritical, []string{"different"}
	if _, d3, err := handler.Action(c, d); err != nil || d3 != d1 {
		t.Errorf("identity fields or risk changed the digest: %s %v", d3, err)
	}
	// nil and empty effects are the same action ("effects": []).
	d.Effects = nil
	an, dn, _ := handler.Action(c, d)
	d.Effects = []string{}
	ae, de, _ := handler.Action(c, d)
	if dn != de || !bytes.Equal(an, ae) || !bytes.Contains(an, []byte(`"effects":[]`)) {
		t.Errorf("nil and empty effects differ: %s / %s", an, ae)
	}
}

func TestActionBindsEverything(t *testing.T) {
	_, base, err := handler.Action(goldenCall, goldenDescriptor)
	if err != nil {
		t.Fatal(err)
	}
	change := map[string]func(*handler.Call, *handler.Descriptor){
		"args value": func(c *handler.Call, _ *handler.Descriptor) {
			c.Args = json.RawMessage(`{"amount":"12.51","currency":"EUR","lines":[{"sku":"A-1","qty":2}]}`)
		},
		"args number": func(c *handler.Call, _ *handler.Descriptor) {
			c.Args = json.RawMessage(`{"amount":"12.50","currency":"EUR","lines":[{"sku":"A-1","qty":3}]}`)
		},
		"capability":  func(c *handler.Call, _ *handler.Descriptor) { c.Capability = "billing.invoice.delete" },
		"kind":        func(_ *handler.Call, d *handler.Descriptor) { d.Kind = "process.exec" },
		"resource":    func(_ *handler.Call, d *handler.Descriptor) { d.Resource = "https://evil.example/invoices" },
		"working dir": func(_ *handler.Call, d *handler.Descriptor) { d.WorkingDirectory = "/tmp" },
		"effects": func(_ *handler.Call, d *handler.Descriptor) {
			d.Effects = []string{"Sends the arguments to evil.example"}
		},
		"summary":       func(_ *handler.Call, d *handler.Descriptor) { d.Summary = "Something else" },
		"effects added": func(_ *handler.Call, d *handler.Descriptor) { d.Effects = append(d.Effects, "More") },
	}
	for name, f := range change {
		c, d := goldenCall, goldenDescriptor
		d.Effects = append([]string(nil), d.Effects...)
		f(&c, &d)
		_, digest, err := handler.Action(c, d)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if digest == base {
			t.Errorf("%s: digest unchanged", name)
		}
	}
	// Insignificant whitespace does not change the digest.
	c := goldenCall
	c.Args = json.RawMessage("\n{ \"amount\" : \"12.50\",\t\"currency\":\"EUR\",\"lines\":[ {\"sku\":\"A-1\",\"qty\":2} ] }\n")
	if _, d, err := handler.Action(c, goldenDescriptor); err != nil || d != base {
		t.Errorf("whitespace changed the digest: %s %v", d, err)
	}
}

func TestActionRefusesArguments(t *testing.T) {
	bad := map[string]string{
		"empty":          ``,
		"array":          `[1,2]`,
		"string":         `"x"`,
		"number":         `1`,
		"null":           `null`,
		"duplicate key":  `{"a":1,"a":2}`,
		"nested dup":     `{"a":{"b":1,"b":1}}`,
		"invalid utf-8":  "{\"a\":\"\xff\"}",
		"lone surrogate": `{"a":"\ud800"}`,
		"big integer":    `{"a":12345678901234567890}`,
		"trailing":       `{"a":1} {}`,
		"syntax":         `{"a":}`,
		"too deep":       `{"a":` + strings.Repeat("[", handler.MaxArgumentsDepth) + strings.Repeat("]", handler.MaxArgumentsDepth) + `}`,
		"too large":      `{"a":"` + strings.Repeat("x", handler.MaxArgumentsSize) + `"}`,
	}
	for name, args := range bad {
		c := goldenCall
		c.Args = json.RawMessage(args)
		_, _, err := handler.Action(c, goldenDescriptor)
		// Check, for calls that need no approval, refuses the same.
		checkErr := handler.Check(c, goldenDescriptor)
		for _, err := range []error{err, checkErr} {
			if !errors.Is(err, handler.ErrInvalidCall) {
				t.Errorf("%s: err = %v, want ErrInvalidCall", name, err)
				continue
			}
			if code := asc.CodeOf(err); code != asc.InvalidRequest {
				t.Errorf("%s: code %v", name, code)
			}
		}
	}
}

func TestActionRefusesCapability(t *testing.T) {
	for _, capName := range []string{"", "billing.*", "no spaces", "-x", strings.Repeat("a.", 100) + "b"} {
		c := goldenCall
		c.Capability = capName
		if _, _, err := handler.Action(c, goldenDescriptor); !errors.Is(err, handler.ErrInvalidCall) {
			t.Errorf("%q: err = %v", capName, err)
		}
		if err := handler.Check(c, goldenDescriptor); !errors.Is(err, handler.ErrInvalidCall) {
			t.Errorf("Check %q: err = %v", capName, err)
		}
	}
}

func TestActionRefusesDescriptor(t *testing.T) {
	long := strings.Repeat("é", 1001)
	bad := map[string]handler.Descriptor{
		"no kind":      {Risk: aais.RiskLow},
		"bad kind":     {Kind: "http request", Risk: aais.RiskLow},
		"no risk":      {Kind: "echo"},
		"bad risk":     {Kind: "echo", Risk: "extreme"},
		"empty effect": {Kind: "echo", Risk: aais.RiskLow, Effects: []string{""}},
		"long effect":  {Kind: "echo", Risk: aais.RiskLow, Effects: []string{long}},
		"long summary": {Kind: "echo", Risk: aais.RiskLow, Summary: long},
		"bad utf-8":    {Kind: "echo", Risk: aais.RiskLow, Resource: "\xff"},
		"long reason":  {Kind: "echo", Risk: aais.RiskLow, RiskReasons: []string{long}},
		"101 effects":  {Kind: "echo", Risk: aais.RiskLow, Effects: strings.Split(strings.Repeat("x,", 100)+"x", ",")},
	}
	for name, d := range bad {
		_, _, err := handler.Action(goldenCall, d)
		if !errors.Is(err, handler.ErrInvalidDescriptor) || asc.CodeOf(err) != asc.InternalError {
			t.Errorf("%s: err = %v", name, err)
		}
		if err := handler.Check(goldenCall, d); !errors.Is(err, handler.ErrInvalidDescriptor) || asc.CodeOf(err) != asc.InternalError {
			t.Errorf("Check %s: err = %v", name, err)
		}
	}
	// Exactly at the limits is fine.
	ok := handler.Descriptor{Kind: "echo", Risk: aais.RiskLow, Summary: long[:2000], Effects: []string{long[:2000]}}
	if _, _, err := handler.Action(goldenCall, ok); err != nil {
		t.Errorf("1000 characters: %v", err)
	}
	if err := handler.Check(goldenCall, ok); err != nil {
		t.Errorf("Check, 1000 characters: %v", err)
	}
}

// The action Action builds travels in an AAIS request unchanged: the request
// carries the same bytes and digest, survives a marshal/parse round trip,
// and its arguments are the call's arguments byte for byte.
func TestActionInAAISRequest(t *testing.T) {
	c := goldenCall
	// Escapes, number literals and member order must all survive.
	c.Args = json.RawMessage(`{"z":1.50,"a":"\u00e9<&>","n":1e3,"b":[true,false,null],"e":{}}`)
	action, digest, err := handler.Action(c, goldenDescriptor)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 8, 30, 18, 0, 0, 0, time.UTC)
	req, err := aais.NewRequest(aais.RequestParams{
		ID:        "apr_1",
		CreatedAt: created,
		ExpiresAt: created.Add(time.Hour),
		Origin:    aais.Origin{Harness: "custos", SessionID: "s-1", AgentID: c.From},
		Action:    action,
		Risk:      goldenDescriptor.AAISRisk(),
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if req.ActionDigest != digest || !bytes.Equal(req.Action.Raw(), action) {
		t.Fatalf("request digest %s, action %s", req.ActionDigest, req.Action.Raw())
	}
	m, err := aais.NewMessage(aais.Header{ID: "evt_1", OccurredAt: created, Sequence: 1, Stream: "authority"}, req)
	if err != nil {
		t.Fatal(err)
	}
	wire, err := aais.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := aais.Parse(wire)
	if err != nil {
		t.Fatal(err)
	}
	r := back.Request
	if r.ActionDigest != digest || !bytes.Equal(r.Action.Raw(), action) {
		t.Errorf("parsed request: digest %s action %s", r.ActionDigest, r.Action.Raw())
	}
	if got := string(r.Action.Arguments()); got != string(c.Args) {
		t.Errorf("arguments = %s, want %s", got, c.Args)
	}
	if r.Action.Kind() != "http.request" || r.Action.Name() != c.Capability || r.Action.Resource() != goldenDescriptor.Resource {
		t.Errorf("view: %s %s %s", r.Action.Kind(), r.Action.Name(), r.Action.Resource())
	}
}

// The deepest arguments Action accepts still fit in an AAIS message.
func TestActionDepthFitsAAIS(t *testing.T) {
	n := handler.MaxArgumentsDepth - 1 // the object itself is one level
	c := goldenCall
	c.Args = json.RawMessage(`{"a":` + strings.Repeat("[", n-1) + "{}" + strings.Repeat("]", n-1) + `}`)
	action, digest, err := handler.Action(c, goldenDescriptor)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 8, 30, 18, 0, 0, 0, time.UTC)
	req, err := aais.NewRequest(aais.RequestParams{
		ID: "apr_1", CreatedAt: created, Origin: aais.Origin{Harness: "custos", SessionID: "s"},
		Action: action, Risk: goldenDescriptor.AAISRisk(),
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "ok"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "no"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := aais.NewMessage(aais.Header{ID: "e", OccurredAt: created, Sequence: 1, Stream: "a"}, req)
	if err != nil {
		t.Fatal(err)
	}
	wire, err := aais.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := aais.Parse(wire)
	if err != nil {
		t.Fatalf("aais refuses the deepest arguments: %v", err)
	}
	if back.Request.ActionDigest != digest {
		t.Error("digest changed")
	}
}

func TestAAISRisk(t *testing.T) {
	r := handler.Descriptor{Risk: aais.RiskHigh}.AAISRisk()
	if r.Level != aais.RiskHigh || len(r.Reasons) != 1 || r.Reasons[0] == "" {
		t.Errorf("%+v", r)
	}
	d := handler.Descriptor{Risk: aais.RiskLow, RiskReasons: []string{"a"}}
	r = d.AAISRisk()
	r.Reasons[0] = "changed"
	if d.RiskReasons[0] != "a" {
		t.Error("AAISRisk shares the reasons slice")
	}
}
