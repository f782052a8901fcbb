package state

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
)

func TestParseKey(t *testing.T) {
	long := "agent:acme.alpha/agent/" + strings.Repeat("a", MaxKeyLength-len("agent:acme.alpha/agent/"))
	tests := []struct {
		key, owner string
		want       Key
		err        error
		contains   string
	}{
		{key: "agent:acme.alpha/agent/user.profile", want: Key{"agent:acme.alpha", ScopeAgent, "user.profile"}},
		{key: "agent:acme.alpha/session/corr-1/step-1", want: Key{"agent:acme.alpha", ScopeSession, "corr-1/step-1"}},
		{key: "agent:acme.alpha/w1/shared/x", want: Key{"agent:acme.alpha/w1", ScopeShared, "x"}},
		{key: "agent:acme.alpha/agent/agent/x", want: Key{"agent:acme.alpha", ScopeAgent, "agent/x"}},
		{key: "agent:acme.alpha/agent/agent/x", owner: "agent:acme.alpha/agent", want: Key{"agent:acme.alpha/agent", ScopeAgent, "x"}},
		{key: "agent:platform.operator/global/rates/EUR-USD", want: Key{"agent:platform.operator", ScopeGlobal, "rates/EUR-USD"}},
		{key: long, want: Key{"agent:acme.alpha", ScopeAgent, long[len("agent:acme.alpha/agent/"):]}},
		{key: long + "a", err: ErrInvalidKey, contains: "length"},
		{key: "", err: ErrInvalidKey},
		{key: "agent:acme.alpha/user.profile", err: ErrInvalidKey},
		{key: "agent:acme.alpha/tenant/user.profile", err: ErrInvalidKey, contains: "scope"},
		{key: "agent:acme.alpha/agent/arsiaprotocol.system", err: ErrReservedKey, contains: "reserved"},
		{key: "agent:acme.alpha/agent/arsiaprotocol.system", err: ErrInvalidKey},
		{key: "agent:acme.alpha/agent/", err: ErrInvalidKey},
		{key: "agent:acme.alpha/agent/a//b", err: ErrInvalidKey},
		{key: "agent:acme.alpha/agent/a b", err: ErrInvalidKey},
		{key: "agent:acme.alpha/agent/é", err: ErrInvalidKey},
		{key: "user:acme.alpha/agent/x", err: ErrInvalidKey},
		{key: "agent:acme/agent/x", err: ErrInvalidKey},
		{key: "agent:acme.alpha/agent/x", owner: "agent:acme.beta", err: ErrInvalidKey, contains: "namespace"},
		{key: "agent:acme.alphabet/agent/x", owner: "agent:acme.alpha", err: ErrInvalidKey},
	}
	for _, tt := range tests {
		got, err := KeyPolicy{Owner: tt.owner}.Parse(tt.key)
		if tt.err != nil {
			if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("Parse(%.60q, owner %q) = %v, want %v containing %q", tt.key, tt.owner, err, tt.err, tt.contains)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Parse(%.60q, owner %q) = %+v, %v; want %+v", tt.key, tt.owner, got, err, tt.want)
		}
		if err == nil && got.String() != tt.key {
			t.Errorf("String() = %q, want %q", got.String(), tt.key)
		}
	}
	if _, err := (KeyPolicy{AllowReserved: true}).Parse("agent:acme.alpha/agent/arsiaprotocol.grants/1"); err != nil {
		t.Errorf("AllowReserved: %v", err)
	}
}

func TestScopes(t *testing.T) {
	for _, s := range Scopes() {
		if got, err := ParseScope(string(s)); err != nil || got != s {
			t.Errorf("ParseScope(%q) = %q, %v", s, got, err)
		}
	}
	if _, err := ParseScope("tenant"); !errors.Is(err, ErrInvalidScope) {
		t.Errorf("ParseScope(tenant) = %v", err)
	}
}

func TestKeyPattern(t *testing.T) {
	const g = "agent:acme.alpha"
	tests := []struct {
		pattern, grantor string
		ok               bool
		match, nomatch   string
	}{
		{"agent:acme.alpha/agent/shared-*", g, true, "agent:acme.alpha/agent/shared-x", "agent:acme.alpha/agent/other"},
		{"agent:acme.alpha/agent/data", g, true, "agent:acme.alpha/agent/data", "agent:acme.alpha/agent/data2"},
		{"agent:acme.alpha/*", g, true, "agent:acme.alpha/shared/x", "agent:acme.alphabet/shared/x"},
		{"agent:acme.alpha/agent/shared-*", "", true, "agent:acme.alpha/agent/shared-1", ""},
		{"agent:acme.alpha*", g, false, "", ""},
		{"agent:acme.alpha*", "", false, "", ""},
		{"agent:acme.beta/agent/x*", g, false, "", ""},
		{"agent:acme.alpha/agent/a*b*", g, false, "", ""},
		{"agent:acme.alpha/agent/a*b", g, false, "", ""},
		{"agent:acme.alpha/tenant/x*", g, false, "", ""},
		{"agent:acme.alpha/agent/arsiaprotocol.g*", g, false, "", ""},
		{"agent:acme.alpha/agent/x y*", g, false, "", ""},
		{"*", g, false, "", ""},
		{"", g, false, "", ""},
		{strings.Repeat("a", MaxKeyPatternLength+1), g, false, "", ""},
	}
	for _, tt := range tests {
		p, err := ParseKeyPattern(tt.pattern, tt.grantor)
		if (err == nil) != tt.ok {
			t.Errorf("ParseKeyPattern(%.40q, %q) error %v, want ok=%v", tt.pattern, tt.grantor, err, tt.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidArgs) {
				t.Errorf("error %v does not wrap ErrInvalidArgs", err)
			}
			continue
		}
		if p.String() != tt.pattern {
			t.Errorf("String() = %q", p.String())
		}
		if tt.match != "" && !p.Matches(tt.match) {
			t.Errorf("%q does not match %q", tt.pattern, tt.match)
		}
		if tt.nomatch != "" && p.Matches(tt.nomatch) {
			t.Errorf("%q matches %q", tt.pattern, tt.nomatch)
		}
	}
}

func TestCheckValue(t *testing.T) {
	big := strings.Repeat("x", MaxValueBytes-2) // plus two quotes: exactly 1 MiB
	tests := []struct {
		v   any
		err error
	}{
		{map[string]any{"k": "small"}, nil},
		{nil, nil},
		{"iVBORw0KGgo=", nil},
		{[]any{1, 2.5, json.Number("3"), true}, nil},
		{big, nil},
		{big + "x", ErrValueTooLarge},
		{math.NaN(), ErrInvalidValue},
		{math.Inf(1), ErrInvalidValue},
		{map[string]any{"n": math.Inf(-1)}, ErrInvalidValue},
		{[]byte("raw"), ErrInvalidValue},
		{struct{}{}, ErrInvalidValue},
		{"\xff", ErrInvalidValue},
		{json.Number("nope"), ErrInvalidValue},
	}
	for i, tt := range tests {
		if err := CheckValue(tt.v); !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("%d: CheckValue = %v, want %v", i, err, tt.err)
		}
	}
	if err := CheckValue(math.NaN()); !strings.Contains(strings.ToLower(err.Error()), "json") {
		t.Errorf("NaN error %q does not mention JSON", err)
	}
	if WireError(CheckValue(big+"x")).Code != arsia.CodePayloadTooLarge {
		t.Error("too large value is not payload_too_large")
	}
}

func baseEntry() map[string]any {
	return map[string]any{
		"key": "agent:acme.alpha/agent/user.profile", "value": map[string]any{"name": "Jane"},
		"owner_agent_id": "agent:acme.alpha", "scope": "agent",
		"created_at": "2026-04-13T12:00:00.000Z", "updated_at": "2026-04-13T12:00:00.000Z",
		"pii_classification": "none", "version": 1,
	}
}

func TestValidateEntry(t *testing.T) {
	gdpr := func(kv ...string) map[string]any {
		m := map[string]any{"profile": "GDPR-STANDARD"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name     string
		edit     func(m map[string]any)
		ctx      EntryContext
		err      error
		contains string
	}{
		{name: "plain"},
		{name: "sender is owner", ctx: EntryContext{Sender: "agent:acme.alpha"}},
		{name: "sender not owner", ctx: EntryContext{Sender: "agent:acme.beta"}, err: ErrForbidden},
		{name: "scope mismatch", edit: func(m map[string]any) { m["scope"] = "shared" }, err: ErrInvalidEntry, contains: "scope"},
		{name: "owner mismatch", edit: func(m map[string]any) { m["owner_agent_id"] = "agent:acme.beta" }, err: ErrInvalidKey},
		{name: "reserved", edit: func(m map[string]any) { m["key"] = "agent:acme.alpha/agent/arsiaprotocol.x" }, err: ErrReservedKey},
		{name: "session 24h ok", edit: func(m map[string]any) {
			m["key"], m["scope"], m["expires_at"] = "agent:acme.alpha/session/t", "session", "2026-04-14T12:00:00.000Z"
		}},
		{name: "session too long", edit: func(m map[string]any) {
			m["key"], m["scope"], m["expires_at"] = "agent:acme.alpha/session/t", "session", "2026-04-14T12:00:00.001Z"
		}, err: ErrInvalidEntry, contains: "exceeds created_at + 24h"},
		{name: "agent long expiry ok", edit: func(m map[string]any) { m["expires_at"] = "2030-01-01T00:00:00.000Z" }},
		{name: "expires before created", edit: func(m map[string]any) { m["expires_at"] = "2026-04-13T11:00:00.000Z" }, err: ErrInvalidEntry},
		{name: "updated before created", edit: func(m map[string]any) { m["updated_at"] = "2026-04-13T11:00:00.000Z" }, err: ErrInvalidEntry},
		{name: "nan", edit: func(m map[string]any) { m["value"] = math.NaN() }, err: ErrInvalidValue, contains: "json"},
		{name: "base64", edit: func(m map[string]any) { m["value"] = "iVBORw0KGgo=" }},
		{name: "version 0", edit: func(m map[string]any) { m["version"] = 0 }, err: ErrInvalidEntry},
		{name: "version float", edit: func(m map[string]any) { m["version"] = 1.5 }, err: ErrInvalidEntry},
		{name: "bad timestamp", edit: func(m map[string]any) { m["created_at"] = "2026-04-13T12:00:00Z" }, err: ErrInvalidEntry},
		{name: "unknown member", edit: func(m map[string]any) { m["extra"] = 1 }, err: ErrInvalidEntry},
		{name: "personal with consent", edit: func(m map[string]any) { m["pii_classification"], m["data_residency"] = "personal", "PT" },
			ctx: EntryContext{Compliance: gdpr("legal_basis", "consent", "data_residency", "PT")}},
		{name: "personal without basis", edit: func(m map[string]any) { m["pii_classification"] = "personal" },
			ctx: EntryContext{Compliance: gdpr("data_residency", "PT")}, err: ErrMissingLegalBasis, contains: "legal_basis"},
		{name: "personal without compliance", edit: func(m map[string]any) { m["pii_classification"] = "personal" }, err: ErrMissingLegalBasis},
		{name: "personal basis from MIFID-II profile", edit: func(m map[string]any) { m["pii_classification"] = "personal" },
			ctx: EntryContext{Compliance: map[string]any{"profile": "MIFID-II"}}},
		{name: "unknown profile", edit: func(m map[string]any) { m["pii_classification"] = "personal" },
			ctx: EntryContext{Compliance: map[string]any{"profile": "NOPE", "legal_basis": "consent"}}, err: ErrUnknownProfile},
		{name: "sensitive needs art 9", edit: func(m map[string]any) {
			m["pii_classification"], m["pii_special_categories"], m["data_residency"] = "sensitive", []any{"health"}, "PT"
		}, ctx: EntryContext{Compliance: gdpr("legal_basis", "consent")}, err: ErrMissingLegalBasis, contains: "9"},
		{name: "sensitive art 9 ok", edit: func(m map[string]any) {
			m["pii_classification"], m["pii_special_categories"] = "sensitive", []any{"health"}
		}, ctx: EntryContext{Compliance: gdpr("legal_basis", "explicit_consent")}},
		{name: "sensitive without categories", edit: func(m map[string]any) { m["pii_classification"] = "sensitive" },
			ctx: EntryContext{Compliance: gdpr("legal_basis", "explicit_consent")}, err: ErrInvalidEntry},
		{name: "categories on none", edit: func(m map[string]any) { m["pii_special_categories"] = []any{"health"} }, err: ErrInvalidEntry},
		{name: "pseudonymised residency mismatch", edit: func(m map[string]any) { m["pii_classification"], m["data_residency"] = "pseudonymised", "US" },
			ctx: EntryContext{Compliance: gdpr("data_residency", "DE")}, err: ErrResidency, contains: "residency"},
		{name: "pseudonymised within EU", edit: func(m map[string]any) { m["pii_classification"], m["data_residency"] = "pseudonymised", "PT" },
			ctx: EntryContext{Compliance: gdpr("data_residency", "EU")}},
		{name: "none residency free", edit: func(m map[string]any) { m["data_residency"] = "US" },
			ctx: EntryContext{Compliance: gdpr("data_residency", "DE")}},
	}
	for _, tt := range tests {
		m := baseEntry()
		if tt.edit != nil {
			tt.edit(m)
		}
		err := ValidateEntry(m, tt.ctx)
		if tt.err == nil {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, tt.err) || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tt.contains)) {
			t.Errorf("%s: got %v, want %v containing %q", tt.name, err, tt.err, tt.contains)
		}
	}
	if err := ValidateEntry(nil, EntryContext{}); !errors.Is(err, ErrInvalidEntry) {
		t.Errorf("nil entry: %v", err)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	m := baseEntry()
	m["expires_at"], m["retention_days"], m["data_residency"], m["deleted"] = "2027-01-01T00:00:00.000Z", 30, "PT", true
	e, err := EntryFromMap(m)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(e)
	want, _ := json.Marshal(m)
	if string(got) != string(want) {
		t.Errorf("round trip:\n got %s\nwant %s", got, want)
	}
}

func TestSetArgs(t *testing.T) {
	e, err := EntryFromMap(baseEntry())
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewSetArgs(e, 3)
	if err != nil {
		t.Fatal(err)
	}
	m := a.Map()
	for _, k := range []string{"key", "value", "scope", "pii_classification", "expected_version"} {
		if _, ok := m[k]; !ok {
			t.Errorf("missing %s in %v", k, m)
		}
	}
	for _, k := range []string{"entry", "owner_agent_id", "created_at", "updated_at", "version", "deleted"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s present in %v", k, m)
		}
	}
	parsed, err := ParseSetArgs(m)
	if err != nil || parsed.Key != a.Key || parsed.ExpectedVersion != 3 {
		t.Errorf("ParseSetArgs = %+v, %v", parsed, err)
	}

	bad := []struct {
		name string
		a    SetArgs
		err  error
	}{
		{"global", SetArgs{Key: "agent:acme.alpha/global/x", Scope: ScopeGlobal, PIIClassification: PIINone}, ErrGlobalWrite},
		{"global key", SetArgs{Key: "agent:acme.alpha/global/x", Scope: ScopeAgent, PIIClassification: PIINone}, ErrGlobalWrite},
		{"scope", SetArgs{Key: "agent:acme.alpha/agent/x", Scope: ScopeShared, PIIClassification: PIINone}, ErrInvalidArgs},
		{"reserved", SetArgs{Key: "agent:acme.alpha/agent/arsiaprotocol.x", Scope: ScopeAgent, PIIClassification: PIINone}, ErrReservedKey},
		{"pii", SetArgs{Key: "agent:acme.alpha/agent/x", Scope: ScopeAgent, PIIClassification: "secret"}, ErrInvalidArgs},
		{"personal without residency", SetArgs{Key: "agent:acme.alpha/agent/x", Scope: ScopeAgent, PIIClassification: PIIPersonal}, ErrInvalidArgs},
		{"nan", SetArgs{Key: "agent:acme.alpha/agent/x", Scope: ScopeAgent, PIIClassification: PIINone, Value: math.NaN()}, ErrInvalidValue},
		{"expires", SetArgs{Key: "agent:acme.alpha/agent/x", Scope: ScopeAgent, PIIClassification: PIINone, ExpiresAt: "tomorrow"}, ErrInvalidArgs},
		{"negative version", SetArgs{Key: "agent:acme.alpha/agent/x", Scope: ScopeAgent, PIIClassification: PIINone, ExpectedVersion: -1}, ErrInvalidArgs},
	}
	for _, tt := range bad {
		if err := tt.a.Validate(); !errors.Is(err, tt.err) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.err)
		}
	}
	ok := SetArgs{Key: "agent:acme.alpha/agent/x", Scope: ScopeAgent, PIIClassification: PIIPersonal, DataResidency: "PT"}
	if err := ok.Check(EntryContext{Sender: "agent:acme.beta", Compliance: map[string]any{"legal_basis": "consent"}}); !errors.Is(err, ErrForbidden) {
		t.Errorf("foreign sender: %v", err)
	}
	if err := ok.Check(EntryContext{Sender: "agent:acme.alpha"}); !errors.Is(err, ErrMissingLegalBasis) {
		t.Errorf("no legal basis: %v", err)
	}
	if err := ok.Check(EntryContext{Sender: "agent:acme.alpha", Compliance: map[string]any{"legal_basis": "consent"}}); err != nil {
		t.Errorf("valid personal SET: %v", err)
	}
	if _, err := ParseSetArgs(map[string]any{"key": "agent:acme.alpha/agent/x", "scope": "agent", "pii_classification": "none"}); err == nil {
		t.Error("SET without value accepted")
	}
	if _, err := ParseSetArgs(map[string]any{"key": "agent:acme.alpha/agent/x", "value": 1, "scope": "agent", "pii_classification": "none", "entry": 1}); err == nil {
		t.Error("SET with unknown member accepted")
	}
}

func TestOtherArgs(t *testing.T) {
	zero, big := 0, 5000
	valid := []interface{ Validate() error }{
		GetArgs{Key: "agent:acme.alpha/agent/x"},
		DeleteArgs{Key: "agent:acme.alpha/agent/x"},
		QueryArgs{},
		QueryArgs{QueryFilter: QueryFilter{Scope: ScopeAgent, KeyPrefix: "agent:acme.alpha/agent/", PIIClassification: PIIPersonal}, Limit: &big, Offset: &zero},
		SnapshotArgs{AsOf: "2026-04-13T12:00:00.000Z", Filter: &QueryFilter{Scope: ScopeAgent}},
		PurgeArgs{Key: "agent:acme.alpha/agent/x", Reason: "GDPR Art. 17 erasure request"},
		GrantArgs{KeyPattern: "agent:acme.alpha/agent/shared-*", GranteeAgentID: "agent:acme.beta", AccessLevel: AccessRead},
		GrantArgs{KeyPattern: "agent:acme.alpha/agent/data", GranteeAgentID: "agent:acme.beta", AccessLevel: AccessReadWrite, ValidUntil: "2026-06-24T00:00:00.000Z"},
		RevokeArgs{GrantID: "11111111-1111-4111-9111-111111111111"},
	}
	for i, a := range valid {
		if err := a.Validate(); err != nil {
			t.Errorf("valid %d (%T): %v", i, a, err)
		}
	}
	neg := -1
	invalid := []interface{ Validate() error }{
		GetArgs{Key: "nope"},
		DeleteArgs{},
		QueryArgs{Limit: &zero},
		QueryArgs{Offset: &neg},
		QueryArgs{QueryFilter: QueryFilter{Scope: "tenant"}},
		QueryArgs{QueryFilter: QueryFilter{OwnerAgentID: "acme"}},
		QueryArgs{QueryFilter: QueryFilter{CreatedAfter: "yesterday"}},
		SnapshotArgs{},
		SnapshotArgs{AsOf: "2026-04-13"},
		SnapshotArgs{AsOf: "2026-04-13T12:00:00.000Z", Filter: &QueryFilter{PIIClassification: "x"}},
		PurgeArgs{Key: "agent:acme.alpha/agent/x", Reason: strings.Repeat("r", 1025)},
		GrantArgs{KeyPattern: "agent:acme.alpha/agent/data", GranteeAgentID: "agent:acme.beta", AccessLevel: "admin"},
		GrantArgs{KeyPattern: "agent:acme.alpha/agent/data", GranteeAgentID: "beta", AccessLevel: AccessRead},
		GrantArgs{KeyPattern: "agent:acme.alpha/agent/data", GranteeAgentID: "agent:acme.beta", AccessLevel: AccessRead, ValidUntil: "soon"},
		RevokeArgs{GrantID: "not-a-uuid"},
	}
	for i, a := range invalid {
		if err := a.Validate(); !errors.Is(err, ErrInvalidArgs) && !errors.Is(err, ErrInvalidKey) {
			t.Errorf("invalid %d (%T): %v", i, a, err)
		}
	}
	if m := (QueryArgs{}).Map(); len(m) != 0 {
		t.Errorf("empty query args = %v", m)
	}
	if _, ok := (QueryArgs{QueryFilter: QueryFilter{KeyPrefix: "p"}}).Map()["prefix"]; ok {
		t.Error("query args use 'prefix'")
	}
	g := GrantArgs{KeyPattern: "agent:acme.alpha/agent/x", GranteeAgentID: "agent:acme.alpha", AccessLevel: AccessRead}
	if err := g.Check("agent:acme.alpha"); err == nil {
		t.Error("self grant accepted")
	}
	if err := g.Check("agent:acme.beta"); err == nil {
		t.Error("grant outside the grantor's namespace accepted")
	}
	for _, p := range []func() error{
		func() error { _, err := ParseGetArgs(map[string]any{"key": "agent:acme.alpha/agent/x"}); return err },
		func() error { _, err := ParseDeleteArgs(map[string]any{"key": "agent:acme.alpha/agent/x"}); return err },
		func() error {
			_, err := ParseQueryArgs(map[string]any{"limit": 10, "key_prefix": "agent:"})
			return err
		},
		func() error {
			_, err := ParseSnapshotArgs(map[string]any{"as_of": "2026-04-13T12:00:00.000Z"})
			return err
		},
		func() error {
			_, err := ParsePurgeArgs(map[string]any{"key": "agent:acme.alpha/agent/x", "reason": "r"})
			return err
		},
		func() error {
			_, err := ParseGrantArgs(map[string]any{"key_pattern": "agent:acme.alpha/agent/*", "grantee_agent_id": "agent:acme.beta", "access_level": "read", "valid_until": nil})
			return err
		},
		func() error {
			_, err := ParseRevokeArgs(map[string]any{"grant_id": "11111111-1111-4111-9111-111111111111"})
			return err
		},
	} {
		if err := p(); err != nil {
			t.Errorf("parse: %v", err)
		}
	}
	if _, err := ParseQueryArgs(map[string]any{"prefix": "agent:"}); err == nil {
		t.Error("query with 'prefix' accepted")
	}
	if _, err := ParseGetArgs(nil); err == nil {
		t.Error("nil args accepted")
	}
	if _, err := ParseQueryArgs(map[string]any{"limit": math.NaN()}); err == nil {
		t.Error("NaN limit accepted")
	}
}

func TestCapabilities(t *testing.T) {
	want := map[Operation]string{
		OpGet: arsia.CapStateRead, OpQuery: arsia.CapStateRead, OpSet: arsia.CapStateWrite, OpDelete: arsia.CapStateWrite,
		OpGrant: arsia.CapStateWrite, OpRevoke: arsia.CapStateWrite, OpPurge: arsia.CapStatePurge, OpSnapshot: arsia.CapStateSnapshot,
	}
	for _, o := range Operations() {
		got, err := RequiredCapability(o)
		if err != nil || got != want[o] {
			t.Errorf("RequiredCapability(%s) = %q, %v", o, got, err)
		}
		back, err := OperationOf(o.PayloadType())
		if err != nil || back != o {
			t.Errorf("OperationOf(%s) = %s, %v", o.PayloadType(), back, err)
		}
		covered := Covers("arsiaprotocol.state.*", want[o])
		if covered != (o != OpPurge && o != OpSnapshot) {
			t.Errorf("state.* covers %s: %v", want[o], covered)
		}
	}
	for _, bad := range []string{"get", "FETCH", ""} {
		if _, err := ParseOperation(bad); !errors.Is(err, ErrUnknownOperation) {
			t.Errorf("ParseOperation(%q) = %v", bad, err)
		}
	}
	if _, err := OperationOf("arsiaprotocol.state/GET"); err == nil {
		t.Error("upper-case payload type accepted")
	}
	if _, err := RequiredCapability("FETCH"); err == nil {
		t.Error("unknown operation has a capability")
	}
	if Operation("x").PayloadType() != "" {
		t.Error("invalid operation has a payload type")
	}
	if err := Authorize([]string{"arsiaprotocol.state.*"}, OpSet); err != nil {
		t.Error(err)
	}
	err := Authorize([]string{"arsiaprotocol.state.*"}, OpPurge)
	var ae *arsia.Error
	if !errors.As(err, &ae) || ae.Code != arsia.CodeForbidden || !errors.Is(err, ErrForbidden) {
		t.Errorf("purge via wildcard: %v", err)
	}
	if err := Authorize([]string{arsia.CapStatePurge}, OpPurge); err != nil {
		t.Error(err)
	}
}

func TestEffectiveRetention(t *testing.T) {
	n := func(i int) *int { return &i }
	tests := []struct {
		profile string
		entry   *int
		want    *int
		err     error
	}{
		{"EU-AI-ACT-HIGH-RISK", nil, n(180), nil},
		{"EU-AI-ACT-HIGH-RISK", n(2555), n(2555), nil},
		{"MIFID-II", n(30), n(1827), nil},
		{"GDPR-STANDARD", nil, nil, nil},
		{"GDPR-STANDARD", n(7), n(7), nil},
		{"NOPE", nil, nil, ErrUnknownProfile},
		{"DORA", n(0), nil, ErrInvalidRetention},
	}
	for _, tt := range tests {
		got, err := EffectiveRetention(compliance.Default(), tt.profile, tt.entry)
		if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("%s: err %v, want %v", tt.profile, err, tt.err)
			continue
		}
		if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
			t.Errorf("%s %v: got %v, want %v", tt.profile, tt.entry, got, tt.want)
		}
	}
	if _, err := EffectiveRetention(nil, "DORA", nil); err != nil {
		t.Errorf("nil registry: %v", err)
	}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if !WithinRetention(created, n(10), created.AddDate(0, 0, 9)) || WithinRetention(created, n(10), created.AddDate(0, 0, 10)) {
		t.Error("WithinRetention boundary")
	}
	if WithinRetention(created, nil, created) || !WithinRetention(created, n(math.MaxInt), created.AddDate(100, 0, 0)) {
		t.Error("WithinRetention nil/huge")
	}
}

func stateEnvelope(ptype string, args map[string]any, comp map[string]any) map[string]any {
	env := map[string]any{
		"v": "1.0", "id": "11111111-1111-4111-9111-111111111111", "ts": "2026-04-13T12:00:00.000Z",
		"from": "agent:acme.alpha", "to": "agent:acme.store", "intent": "request",
		"payload": map[string]any{"type": ptype, "args": args},
	}
	if comp != nil {
		env["compliance"] = comp
	}
	return env
}

func TestPayloadHash(t *testing.T) {
	a, err := PayloadHash(map[string]any{"type": "arsiaprotocol.state/set", "args": map[string]any{"value": map[string]any{"b": 2, "a": 1}}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := PayloadHash(map[string]any{"args": map[string]any{"value": map[string]any{"a": 1.0, "b": json.Number("2")}}, "type": "arsiaprotocol.state/set"})
	if a != b || len(a) != 64 {
		t.Errorf("hashes differ: %s %s", a, b)
	}
	for _, bad := range []map[string]any{nil, {"x": math.NaN()}} {
		if _, err := PayloadHash(bad); !errors.Is(err, ErrAudit) {
			t.Errorf("PayloadHash(%v) = %v", bad, err)
		}
	}
}

func TestNewAuditRecord(t *testing.T) {
	now := time.Date(2026, 4, 13, 12, 0, 1, 0, time.UTC)
	comp := map[string]any{"profile": "EU-AI-ACT-HIGH-RISK", "legal_basis": "consent", "data_residency": "PT", "pii_involved": true}
	setArgs := map[string]any{"key": "agent:acme.alpha/agent/user.profile", "value": map[string]any{"name": "Jane"},
		"scope": "agent", "pii_classification": "personal", "data_residency": "PT"}
	rec, err := NewAuditRecord(stateEnvelope("arsiaprotocol.state/set", setArgs, comp), nil,
		AuditInput{EventType: "state_set", OperatorID: "LEI:X", ProcessedAt: now, Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	m := rec.Map()
	for k, want := range map[string]any{"key": setArgs["key"], "owner_agent_id": "agent:acme.alpha", "actor_agent_id": "agent:acme.alpha",
		"version": 2, "pii_classification": "personal", "legal_basis": "consent", "timestamp": "2026-04-13T12:00:00.000Z",
		"compliance_profile": "EU-AI-ACT-HIGH-RISK", "data_residency": "PT", "retained_until": "2026-10-10T12:00:01.000Z"} {
		if got, _ := json.Marshal(m[k]); string(got) != mustJSON(want) {
			t.Errorf("%s = %s, want %s", k, got, mustJSON(want))
		}
	}
	if _, ok := m["value"]; ok || strings.Contains(mustJSON(m), "Jane") {
		t.Error("audit record leaks the value")
	}
	if !arsia.ValidMessageID(rec.RecordID) {
		t.Errorf("record id %q", rec.RecordID)
	}

	// A partial record is refused unless Partial is set.
	bare := stateEnvelope("arsiaprotocol.state/set", map[string]any{"key": "agent:acme.alpha/agent/k", "value": 1}, comp)
	if _, err := NewAuditRecord(bare, nil, AuditInput{EventType: "state_set", OperatorID: "LEI:X", ProcessedAt: now}); !errors.Is(err, ErrAudit) {
		t.Errorf("partial state_set accepted: %v", err)
	}
	if _, err := NewAuditRecord(bare, nil, AuditInput{EventType: "state_set", OperatorID: "LEI:X", ProcessedAt: now, Partial: true}); err != nil {
		t.Errorf("Partial: %v", err)
	}

	purge := stateEnvelope("arsiaprotocol.state/purge", map[string]any{"key": "agent:acme.alpha/agent/p", "reason": "gdpr_erasure"}, map[string]any{"profile": "GDPR-STANDARD"})
	rec, err = NewAuditRecord(purge, nil, AuditInput{EventType: "state_purge", OperatorID: "LEI:X", ProcessedAt: now,
		RetentionDays: 90, PIIClassification: PIIPersonal})
	if err != nil {
		t.Fatal(err)
	}
	if rec.InitiatorAgentID != "agent:acme.alpha" || rec.PurgedAt != "2026-04-13T12:00:01.000Z" || rec.Reason != "gdpr_erasure" {
		t.Errorf("purge record %+v", rec)
	}

	grant := stateEnvelope("arsiaprotocol.state/grant", map[string]any{"key_pattern": "agent:acme.alpha/shared/*",
		"grantee_agent_id": "agent:acme.beta", "access_level": "read"}, map[string]any{"profile": "DORA"})
	rec, err = NewAuditRecord(grant, nil, AuditInput{EventType: "state_grant", OperatorID: "LEI:X", ProcessedAt: now,
		GrantID: "22222222-2222-4222-9222-222222222222"})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := rec.Map()["valid_until"]; !ok || v != nil {
		t.Errorf("state_grant valid_until = %v, %v; want null", v, ok)
	}
	revoke := stateEnvelope("arsiaprotocol.state/revoke", map[string]any{"grant_id": "22222222-2222-4222-9222-222222222222"}, map[string]any{"profile": "DORA"})
	if _, err := NewAuditRecord(revoke, nil, AuditInput{EventType: "state_revoke", OperatorID: "LEI:X", ProcessedAt: now, GranteeAgentID: "agent:acme.beta"}); err != nil {
		t.Error(err)
	}
	del := stateEnvelope("arsiaprotocol.state/delete", map[string]any{"key": "agent:acme.alpha/agent/d"}, map[string]any{"profile": "DORA"})
	if _, err := NewAuditRecord(del, nil, AuditInput{EventType: "state_delete", OperatorID: "LEI:X", ProcessedAt: now, Version: 4}); err != nil {
		t.Error(err)
	}

	for name, in := range map[string]AuditInput{
		"request event": {EventType: "request", OperatorID: "LEI:X", ProcessedAt: now, Partial: true},
		"wrong payload": {EventType: "state_delete", OperatorID: "LEI:X", ProcessedAt: now, Partial: true},
		"no operator":   {EventType: "state_purge", ProcessedAt: now, Partial: true},
		"no time":       {EventType: "state_purge", OperatorID: "LEI:X", Partial: true},
		"bad record id": {RecordID: "x", EventType: "state_purge", OperatorID: "LEI:X", ProcessedAt: now, Partial: true},
		"no retention":  {EventType: "state_purge", OperatorID: "LEI:X", ProcessedAt: now, Partial: true},
	} {
		if _, err := NewAuditRecord(purge, nil, in); !errors.Is(err, ErrAudit) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if EventType(OpGet) != "" || EventType(OpPurge) != "state_purge" {
		t.Error("EventType")
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
