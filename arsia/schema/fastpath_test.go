package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// fullErrors runs the full validator, bypassing the fast path.
func fullErrors(t testing.TB, v any) []Error {
	t.Helper()
	r, err := defaultRegistry()
	if err != nil {
		t.Fatal(err)
	}
	errs, err := r.validate(v, EnvelopeSchema)
	if err != nil {
		t.Fatalf("full validator: %v", err)
	}
	return errs
}

// checkImplication fails when the fast path accepts v but the full
// validator reports errors. It returns whether the fast path accepted v.
func checkImplication(t testing.TB, what string, v any) bool {
	t.Helper()
	if !fastEnvelopeValid(v) {
		return false
	}
	if errs := fullErrors(t, v); len(errs) > 0 {
		b, _ := json.Marshal(v)
		t.Fatalf("%s: fast path accepted an envelope the schema rejects:\n%s\nerrors: %q", what, b, texts(errs))
	}
	return true
}

func TestFastPathEnabled(t *testing.T) {
	if !fastPathEnabled() {
		t.Fatal("fast path disabled: arsia-message.schema.json or arsia-common.schema.json changed; " +
			"re-audit fastpath.go against the new files and update fastPathPins")
	}
	// A registry with other bytes must not enable it.
	r := testRegistry(t, map[string]string{
		"arsia-message.schema.json": `{"type":"object"}`,
		"arsia-common.schema.json":  `{}`,
	})
	if r.fastPathUsable() {
		t.Fatal("fast path usable over unpinned schema files")
	}
}

// fastAccepted are envelopes of the shapes the fast path exists for; it
// must decide all of them.
var fastAccepted = []string{
	validEnvelope,
	// request with every optional member the fast path covers
	`{"v":"1.0","id":"7c9e6679-7425-40de-944b-e07fc1f90ae7","ts":"2026-03-24T14:30:00.000Z",
	 "from":"agent:arsialabs.demo.risk-assessor","to":"agent:arsialabs.demo.compliance-checker/inbox_1",
	 "intent":"request","expires_at":"2026-03-24T14:30:30.000Z","min_v":"1.0",
	 "capabilities":["compliance.check","risk.assess"],
	 "idempotency":{"key":"risk-check-2026-03-24-001","expires_at":"2026-03-24T15:30:00.000Z"},
	 "context":{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331","flags":1,"locale":"pt-PT","priority":8},
	 "payload":{"type":"arsiaprotocol.compliance/check","version":"1.0","args":{"client_id":"C-2026-0042","amount":50000.0,"lines":[1,2.5,null,true,{"a":[]}]}},
	 "security":{"alg":"EdDSA","kid":"agent:arsialabs.demo.risk-assessor#key1","sig":"c2ln"},
	 "compliance":{"profile":"EU-AI-ACT-HIGH-RISK","data_residency":"EU","audit_required":true,"retention_days":180,
	  "human_oversight":"required_before_execution","explainability_required":true,"pii_involved":true,
	  "legal_basis":"contract","ai_system_classification":"high-risk","x-extension":{"any":["thing",1]}}}`,
	// response
	`{"v":"1.0","id":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","ts":"2026-03-24T10:15:30.500Z",
	 "from":"agent:acme.payments","to":"agent:acme.billing","intent":"response",
	 "correlation_id":"550E8400-E29B-41D4-A716-446655440000",
	 "payload":{"type":"com.acme.payments/charge","result":{"status":"ok"}},
	 "security":{"alg":"ES256","kid":"agent:acme.payments#k","sig":"x","encrypted":false}}`,
	// error, forbidden with the details schema
	`{"v":"1.0","id":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","ts":"2026-03-24T10:15:30.500Z",
	 "from":"agent:acme.payments","to":"agent:acme.billing","intent":"error",
	 "correlation_id":"550e8400-e29b-41d4-a716-446655440000",
	 "payload":{"type":"arsiaprotocol.error","error":{"code":"forbidden","description":"Insufficient capabilities",
	  "details":{"required_capabilities":["payments.charge","payments.refund"],"provided_capabilities":["payments.charge"]}}},
	 "security":{"alg":"EdDSA","kid":"agent:acme.payments#key1","sig":"sig"}}`,
	// error with a custom code and no details, no security
	`{"v":"1.0","id":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","ts":"2026-03-24T10:15:30.500Z",
	 "from":"agent:acme.payments","to":"agent:acme.billing","intent":"error",
	 "correlation_id":"550e8400-e29b-41d4-a716-446655440000",
	 "payload":{"type":"x","error":{"code":"com.example.insufficient-funds","description":""}}}`,
	// event with MIFID-II retention at its floor
	`{"v":"1.0","id":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","ts":"2026-03-24T10:15:30.500Z",
	 "from":"agent:acme.payments","to":"agent:acme.billing","intent":"event",
	 "payload":{"type":"com.acme.trades/executed","data":{"n":1}},
	 "compliance":{"profile":"MIFID-II","retention_days":1827}}`,
}

func TestFastPathAcceptsCommonShapes(t *testing.T) {
	for i, text := range fastAccepted {
		v := decodeJSON(t, text)
		if errs := fullErrors(t, v); len(errs) > 0 {
			t.Fatalf("case %d is not valid: %q", i, texts(errs))
		}
		if !fastEnvelopeValid(v) {
			t.Errorf("case %d: fast path declined a common valid envelope", i)
		}
		if errs := ValidateEnvelope(v); len(errs) != 0 {
			t.Errorf("case %d: ValidateEnvelope: %q", i, texts(errs))
		}
	}
	// Go integers, as hand-built maps carry them.
	env := decodeJSON(t, fastAccepted[1]).(map[string]any)
	env["context"].(map[string]any)["flags"] = uint8(1)
	env["compliance"].(map[string]any)["retention_days"] = 365
	if !checkImplication(t, "go ints", env) {
		t.Error("fast path declined Go integers")
	}
}

// Every rejection the full validator makes of the common shapes below
// must be a decline of the fast path; these are the edges of each check.
func TestFastPathDeclinesInvalid(t *testing.T) {
	base := func() map[string]any { return decodeJSON(t, fastAccepted[1]).(map[string]any) }
	set := func(m map[string]any, path string, v any) map[string]any {
		parts := strings.Split(path, "/")
		cur := m
		for _, p := range parts[:len(parts)-1] {
			cur = cur[p].(map[string]any)
		}
		if v == nil {
			delete(cur, parts[len(parts)-1])
		} else {
			cur[parts[len(parts)-1]] = v
		}
		return m
	}
	cases := map[string]any{
		"v":                          "1.0\n",
		"id":                         "7C9E6679-7425-40de-944b-e07fc1f90ae7",
		"ts":                         "2026-03-24T14:30:00Z",
		"from":                       "agent:acme",
		"to":                         "agent:acme.-x",
		"intent":                     "Request",
		"expires_at":                 "2026-03-24T14:30:30.000+00:00",
		"min_v":                      "1",
		"capabilities":               []any{"a.b", "a.b"},
		"idempotency/key":            "caf\u00e9",
		"context/flags":              json.Number("256"),
		"context/priority":           json.Number("1.5"),
		"context/trace_id":           "0AF7651916CD43DD8448EB211C80319C",
		"security/alg":               "HS256",
		"compliance/legal_basis":     "contracts",
		"compliance/retention_days":  json.Number("0"),
		"compliance/data_residency":  "eu",
		"payload/version":            "v1",
		"payload/type":               "com.acme/",
		"payload/result":             map[string]any{},
		"payload/args/amount":        math.NaN(),
		"compliance/human_oversight": nil, // high-risk requires it
	}
	for path, v := range cases {
		env := set(base(), path, v)
		if errs := fullErrors(t, env); len(errs) == 0 {
			t.Errorf("%s: expected the full validator to reject", path)
		}
		if fastEnvelopeValid(env) {
			t.Errorf("%s: fast path accepted an invalid envelope", path)
		}
	}
}

// sharedDir is the upstream conformance material, when checked out next
// to the repository.
const sharedDir = "../../../shared/conformance/arsia"

// forEachObject calls f on every JSON object in v, v included.
func forEachObject(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(v)
		for _, e := range v {
			forEachObject(e, f)
		}
	case []any:
		for _, e := range v {
			forEachObject(e, f)
		}
	}
}

// TestFastPathDifferentialVectors checks the implication on every object
// in the upstream test vectors and conformance suites (envelopes, valid and
// invalid, and everything else), and on this package's envelope fixtures.
func TestFastPathDifferentialVectors(t *testing.T) {
	checked, accepted := 0, 0
	check := func(what string, v any) {
		forEachObject(v, func(m map[string]any) {
			checked++
			if checkImplication(t, what, m) {
				accepted++
			}
		})
	}
	for _, text := range append(slices.Clone(fastAccepted),
		`{"v":"x","payload":{"type":1}}`,
		`{"v":"1.0","intent":"request","payload":{"type":"a.b/c","args":{},"result":{}},"capabilities":["a.b","a.b"]}`,
		`{"v":"2.0","intent":"pending_approval","payload":{"type":"arsiaprotocol.oversight/pending","args":{"risk_level":11}}}`,
		`{"security":{"alg":"EdDSA","encrypted":true},"payload":"abc.def","compliance":{"retention_days":0.5}}`,
		`{"payload":{"type":"arsiaprotocol.state/nope","data":{"amount":0.07}},"context":{"flags":256,"priority":-1}}`,
	) {
		check("fixture", decodeJSON(t, text))
	}
	// The message schema's own examples.
	check("schema examples", decodeJSON(t, string(mustFile(t, EnvelopeSchema))))

	vectors := filepath.Join(sharedDir, "shared", "test-vectors", "arsia-test-vectors.json")
	data, err := os.ReadFile(vectors)
	if err != nil {
		t.Logf("upstream vectors not checked: %v", err)
	} else {
		check("test vectors", decodeJSON(t, string(data)))
	}
	suites, _ := filepath.Glob(filepath.Join(sharedDir, "suites", "*.yaml"))
	jsons, _ := filepath.Glob(filepath.Join(sharedDir, "shared", "*", "*.json"))
	for _, name := range append(suites, jsons...) {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if strings.HasSuffix(name, ".yaml") {
			if err := yaml.Unmarshal(data, &doc); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if doc, err = yamlToJSON(doc); err != nil {
				t.Logf("%s: skipped: %v", name, err)
				continue
			}
		} else if doc, err = decodeNumbers(data); err != nil {
			continue
		}
		check(filepath.Base(name), doc)
	}
	t.Logf("differential over fixtures and upstream material: %d objects, %d accepted by the fast path, 0 disagreements", checked, accepted)
	if accepted == 0 {
		t.Error("the fast path accepted nothing")
	}
}

func mustFile(t testing.TB, name string) []byte {
	data, ok := File(name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	return data
}

func decodeNumbers(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// yamlToJSON turns a decoded YAML document into decoded JSON the way the
// runtime sees it: numbers as json.Number (non-finite floats stay float64,
// which is not JSON), timestamps as strings.
func yamlToJSON(v any) (any, error) {
	switch c := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(c))
		for k, e := range c {
			var err error
			if out[k], err = yamlToJSON(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(c))
		for i, e := range c {
			var err error
			if out[i], err = yamlToJSON(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case int:
		return json.Number(strconv.Itoa(c)), nil
	case float64:
		if math.IsNaN(c) || math.IsInf(c, 0) {
			return c, nil
		}
		return json.Number(strconv.FormatFloat(c, 'g', -1, 64)), nil
	case time.Time:
		return c.Format(time.RFC3339Nano), nil
	case nil, bool, string:
		return c, nil
	}
	return nil, fmt.Errorf("unexpected YAML value %T", v)
}

// ---- Pattern checkers against the schema's own regular expressions ----

// schemaPattern extracts a pattern from the embedded schema files, so the
// test compares against the exact text the validator compiles.
func schemaPattern(t testing.TB, file, pointer string) *regexp.Regexp {
	t.Helper()
	r, _ := defaultRegistry()
	v, ok := r.orderedValue(file, pointer)
	if !ok {
		t.Fatalf("%s#%s: not found", file, pointer)
	}
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%s#%s: not a string", file, pointer)
	}
	return regexp.MustCompile(s)
}

type patternChecker struct {
	name     string
	file     string
	pointer  string
	check    func(string) bool
	alphabet string
	samples  []string
	maxLen   int // the schema's maxLength, 0 if none
}

func patternCheckers() []patternChecker {
	const msg, common = "arsia-message.schema.json", "arsia-common.schema.json"
	return []patternChecker{
		{"version", msg, "/properties/v/pattern", isVersion, "0123456789.a\n ", []string{"1.0", "10.25", "1.", ".1", "1.0.0", "1.0\n"}, 0},
		{"version min_v", msg, "/properties/min_v/pattern", isVersion, "0123456789.", []string{"1.0"}, 0},
		{"id", msg, "/properties/id/pattern", isUUIDv4Lower, "0123456789abcdefABF-4g\n",
			[]string{"550e8400-e29b-41d4-a716-446655440000", "550e8400-e29b-41d4-c716-446655440000", "550e8400-e29b-41d4-a716-44665544000\n"}, 0},
		{"uuid-v4", common, "/$defs/uuid-v4/pattern", isUUIDv4, "0123456789abcdefABCDEF-4g\n",
			[]string{"550E8400-E29B-41D4-B716-446655440000", "550e8400-e29b-31d4-a716-446655440000"}, 0},
		{"timestamp", common, "/$defs/rfc3339-ms-utc/pattern", isTimestampMS, "0123456789-T:.Z z\n",
			[]string{"2026-03-24T10:00:00.000Z", "2026-03-24T10:00:00.00Z", "2026-03-24T10:00:00.000Z\n", "2026-03-24t10:00:00.000Z"}, 0},
		{"agent-id", common, "/$defs/agent-id/pattern", isAgentID, "aZ09-._/:\n",
			[]string{"agent:acme.billing", "agent:a.b/c_-", "agent:a." + strings.Repeat("b", 249), "agent:a." + strings.Repeat("b", 248) + "/c", "agent:a.b/", "agent:a..b", "agent:-a.b", "agent:a-.b", "agent:a.b/c/d", "agent:a.b.c-d.e1/_x", "agent:a.b/x.y"}, 256},
		{"capability", common, "/$defs/capability-name/pattern", isCapability, "aZ09._-\n",
			[]string{"a.b", "a", "a.b.", "a.1b", "A1.B2.c3", ".a.b"}, 0},
		{"payload-type", common, "/$defs/payload-type/pattern", isPayloadType, "aZ09._-/\n",
			[]string{"a", "a.b/c", "a/b/c-d_e", "a/b.c", "a//b", "a/", "1a", "a/_b", "a.b.c/d/e"}, 0},
		{"error-code", msg, "/properties/payload/oneOf/1/properties/error/properties/code/oneOf/1/pattern", isCustomErrorCode, "az09.-_A\n",
			[]string{"com.example.insufficient-funds", "com-x.y", "a.b", "a", "a.-b", "a.b-", "a.0b"}, 0},
		{"idempotency-key", msg, "/properties/idempotency/properties/key/pattern", func(s string) bool { return s != "" && isPrintableASCII(s) },
			" ~a\x7f\x1f\né", []string{" ", "~", "a b", "\x7f"}, 0},
		{"trace_id", msg, "/properties/context/properties/trace_id/pattern", func(s string) bool { return len(s) == 32 && isLowerHex(s) },
			"09afAg\n", []string{strings.Repeat("a", 32), strings.Repeat("a", 31) + "\n"}, 0},
		{"span_id", msg, "/properties/context/properties/span_id/pattern", func(s string) bool { return len(s) == 16 && isLowerHex(s) },
			"09afAg\n", []string{strings.Repeat("0", 16)}, 0},
		{"iso-3166", common, "/$defs/iso-3166-1-alpha-2/pattern", isUpper2, "AZaz@[\n", []string{"EU", "eu", "EUR"}, 0},
	}
}

// matches is the schema's verdict: the pattern and, if any, maxLength in
// characters.
func (pc patternChecker) matches(re *regexp.Regexp, s string) bool {
	return re.MatchString(s) && (pc.maxLen == 0 || utf8.RuneCountInString(s) <= pc.maxLen)
}

// mutateString derives strings near s from alphabet.
func mutateString(rng *rand.Rand, s, alphabet string) string {
	b := []byte(s)
	for n := rng.IntN(3) + 1; n > 0; n-- {
		switch op := rng.IntN(5); {
		case op == 0 && len(b) > 0: // replace a byte
			b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
		case op == 1: // insert
			i := rng.IntN(len(b) + 1)
			b = slices.Insert(b, i, alphabet[rng.IntN(len(alphabet))])
		case op == 2 && len(b) > 0: // delete
			i := rng.IntN(len(b))
			b = slices.Delete(b, i, i+1)
		case op == 3: // append a newline or a multi-byte rune
			b = append(b, []string{"\n", "é", "\u2028", "\r\n"}[rng.IntN(4)]...)
		default: // random string over the alphabet
			b = b[:0]
			for range rng.IntN(40) {
				b = append(b, alphabet[rng.IntN(len(alphabet))])
			}
		}
	}
	return string(b)
}

// TestPatternCheckersMatchRegexps compares every hand-written checker with
// the schema's regular expression, both ways, on samples and random
// mutations of them.
func TestPatternCheckersMatchRegexps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, pc := range patternCheckers() {
		re := schemaPattern(t, pc.file, pc.pointer)
		n := 0
		try := func(s string) {
			n++
			want := pc.matches(re, s)
			if got := pc.check(s); got != want {
				t.Errorf("%s: %q: checker %v, regexp %v", pc.name, s, got, want)
			}
		}
		for _, s := range pc.samples {
			try(s)
			for range 3000 {
				try(mutateString(rng, s, pc.alphabet))
			}
		}
		t.Logf("%s: %d strings", pc.name, n)
	}
}

// FuzzPatternCheckers compares the checkers with the regexps on arbitrary
// strings.
func FuzzPatternCheckers(f *testing.F) {
	checkers := patternCheckers()
	regexps := make([]*regexp.Regexp, len(checkers))
	for i, pc := range checkers {
		regexps[i] = schemaPattern(f, pc.file, pc.pointer)
		for _, s := range pc.samples {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, pc := range checkers {
			if got, want := pc.check(s), pc.matches(regexps[i], s); got != want {
				t.Errorf("%s: %q: checker %v, regexp %v", pc.name, s, got, want)
			}
		}
	})
}

// ---- Mutation-based differential test ----

// choices feeds decisions to the mutator: from fuzz bytes first, then from
// a PRNG seeded by them, so short inputs still mutate deeply.
type choices struct {
	data []byte
	rng  *rand.Rand
}

func newChoices(data []byte) *choices {
	var seed uint64
	for _, b := range data {
		seed = seed*1099511628211 + uint64(b)
	}
	return &choices{data: data, rng: rand.New(rand.NewPCG(seed, uint64(len(data))))}
}

func (c *choices) intn(n int) int {
	if n <= 1 {
		return 0
	}
	if len(c.data) > 0 {
		b := c.data[0]
		c.data = c.data[1:]
		return int(b) % n
	}
	return c.rng.IntN(n)
}

// interesting are values that reach the schema's conditionals and edges.
var interesting = []any{
	"request", "response", "event", "error", "pending_approval", "approval_decision", "Request",
	"forbidden", "conflict", "not_implemented", "rate_limited", "payload_too_large", "service_unavailable",
	"certificate_invalid", "internal_error", "com.example.x-y", "Com.example",
	"high-risk", "unacceptable-risk", "MIFID-II", "DORA", "DSA-VLOP", "PAC-AGRICULTURE", "GDPR-STANDARD",
	"contract", "consent", "required_before_execution", "EU", "eu", "E",
	"arsiaprotocol.assets.escrow.release", "arsiaprotocol.assets/transfer-request", "arsiaprotocol.assets/escrow-cancel",
	"arsiaprotocol.state/get", "arsiaprotocol.state/nope", "arsiaprotocol.oversight/pending", "arsiaprotocol.error",
	"EdDSA", "HS256", "1.0", "1", "2.0\n", "agent:acme.billing", "agent:acme", "550e8400-e29b-41d4-a716-446655440000",
	"2026-03-24T10:00:00.000Z", "2026-03-24T10:00:00Z", "", " ", "é", strings.Repeat("a", 129), "agent:a." + strings.Repeat("b", 260),
	true, false, nil,
	json.Number("0"), json.Number("-0"), json.Number("1"), json.Number("-1"), json.Number("10"), json.Number("11"),
	json.Number("255"), json.Number("256"), json.Number("1826"), json.Number("1827"), json.Number("729"),
	json.Number("1.0"), json.Number("1.5"), json.Number("1e2"), json.Number("01"), json.Number("99999999999999999999"),
	json.Number("1e400"), json.Number("0.07"), json.Number("NaN"),
	1, int64(-1), uint8(255), uint64(math.MaxUint64), 1.0, 1.5, math.NaN(), math.Inf(1), float32(2),
	[]any{}, map[string]any{}, []any{"a.b"}, []any{"a.b", "a.b"}, []any{1}, []string{"x"}, struct{}{},
	map[string]any{"required_capabilities": []any{"a"}, "provided_capabilities": []any{}},
	map[string]any{"partial_rollback": true}, map[string]any{"oversight_decision": "denied"},
	map[string]any{"code": "forbidden", "description": "d"}, map[string]any{"type": "a.b"},
}

// memberNames are names to insert: every name the envelope schema gives a
// meaning somewhere, and unknown ones.
var memberNames = []string{
	"v", "id", "ts", "from", "to", "intent", "correlation_id", "expires_at", "min_v", "capabilities",
	"idempotency", "context", "security", "compliance", "payload", "type", "version", "args", "result",
	"data", "explanation", "error", "code", "description", "details", "alg", "kid", "sig", "encrypted",
	"enc_alg", "enc_method", "key", "trace_id", "span_id", "flags", "locale", "priority", "profile",
	"data_residency", "audit_required", "retention_days", "human_oversight", "explainability_required",
	"pii_involved", "legal_basis", "ai_system_classification", "required_capabilities",
	"provided_capabilities", "partial_rollback", "oversight_decision", "already_rolled_back",
	"current_version", "relay_failed", "data_residency_violation", "payment_reference", "x", "", "V",
}

// containers lists every object and array in v with a setter for each.
type slot struct {
	get func() any
	set func(any)
	del func() // nil for array elements
}

func slots(v any, out []slot) []slot {
	switch c := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range c {
				if !yield(k) {
					return
				}
			}
		}) {
			out = append(out, slot{
				get: func() any { return c[k] },
				set: func(x any) { c[k] = x },
				del: func() { delete(c, k) },
			})
			out = slices.Concat(out, slots(c[k], nil))
		}
	case []any:
		for i := range c {
			out = append(out, slot{get: func() any { return c[i] }, set: func(x any) { c[i] = x }})
			out = slices.Concat(out, slots(c[i], nil))
		}
	}
	return out
}

func objects(v any, out []map[string]any) []map[string]any {
	forEachObject(v, func(m map[string]any) { out = append(out, m) })
	return out
}

func deepCopyJSON(v any) any {
	switch c := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(c))
		for k, e := range c {
			out[k] = deepCopyJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(c))
		for i, e := range c {
			out[i] = deepCopyJSON(e)
		}
		return out
	}
	return v
}

// mutate applies one to four structural mutations to env in place.
func mutate(c *choices, env map[string]any) {
	for n := c.intn(4) + 1; n > 0; n-- {
		ss := slots(env, nil)
		switch op := c.intn(7); op {
		case 0: // delete a member
			var dels []slot
			for _, s := range ss {
				if s.del != nil {
					dels = append(dels, s)
				}
			}
			if len(dels) > 0 {
				dels[c.intn(len(dels))].del()
			}
		case 1: // insert a member, known or unknown, at any level
			objs := objects(env, nil)
			o := objs[c.intn(len(objs))]
			o[memberNames[c.intn(len(memberNames))]] = deepCopyJSON(interesting[c.intn(len(interesting))])
		case 2, 3: // replace a value by an interesting one (retype, swap intent...)
			if len(ss) > 0 {
				ss[c.intn(len(ss))].set(deepCopyJSON(interesting[c.intn(len(interesting))]))
			}
		case 4: // perturb a string to break or keep its pattern
			var strs []slot
			for _, s := range ss {
				if _, ok := s.get().(string); ok {
					strs = append(strs, s)
				}
			}
			if len(strs) > 0 {
				s := strs[c.intn(len(strs))]
				rng := rand.New(rand.NewPCG(uint64(c.intn(256)), uint64(c.intn(256))))
				s.set(mutateString(rng, s.get().(string), "aA0-_./:#é\n ~\x00Zz9"))
			}
		case 5: // empty or duplicate inside an array
			var arrs []slot
			for _, s := range ss {
				if _, ok := s.get().([]any); ok {
					arrs = append(arrs, s)
				}
			}
			if len(arrs) > 0 {
				s := arrs[c.intn(len(arrs))]
				a := s.get().([]any)
				if c.intn(2) == 0 || len(a) == 0 {
					s.set([]any{})
				} else {
					s.set(append(a, deepCopyJSON(a[c.intn(len(a))])))
				}
			}
		case 6: // move a value to another member (e.g. swap shapes)
			if len(ss) > 1 {
				from := ss[c.intn(len(ss))]
				to := ss[c.intn(len(ss))]
				to.set(deepCopyJSON(from.get()))
			}
		}
	}
}

// mutationBases are the valid envelopes mutations start from.
func mutationBases(t testing.TB) []map[string]any {
	var out []map[string]any
	for _, text := range fastAccepted {
		out = append(out, decodeJSON(t, text).(map[string]any))
	}
	if data, err := os.ReadFile(filepath.Join(sharedDir, "shared", "test-vectors", "arsia-test-vectors.json")); err == nil {
		var vf struct {
			Vectors []struct {
				Message json.RawMessage `json:"message"`
			} `json:"vectors"`
		}
		if json.Unmarshal(data, &vf) == nil {
			for _, v := range vf.Vectors {
				if m, err := decodeNumbers(v.Message); err == nil {
					if env, ok := m.(map[string]any); ok && fastEnvelopeValid(env) {
						out = append(out, env)
					}
				}
			}
		}
	}
	return out
}

type mutationStats struct{ runs, fastAccepted, fullValid int }

func runMutation(t testing.TB, bases []map[string]any, data []byte, st *mutationStats) {
	c := newChoices(data)
	env := deepCopyJSON(bases[c.intn(len(bases))]).(map[string]any)
	mutate(c, env)
	st.runs++
	if checkImplication(t, fmt.Sprintf("mutation %x", data), env) {
		st.fastAccepted++
		st.fullValid++
	} else if testing.Verbose() {
		if len(fullErrors(t, env)) == 0 {
			st.fullValid++
		}
	}
}

// TestFastPathMutations runs a fixed number of random mutations on every
// test run; FuzzFastPathMutations explores further.
func TestFastPathMutations(t *testing.T) {
	bases := mutationBases(t)
	n := 3000
	if testing.Short() {
		n = 300
	}
	var st mutationStats
	rng := rand.New(rand.NewPCG(7, 11))
	for range n {
		var seed [16]byte
		for i := range seed {
			seed[i] = byte(rng.IntN(256))
		}
		runMutation(t, bases, seed[:], &st)
	}
	t.Logf("%d mutated envelopes from %d bases: %d accepted by the fast path (all valid under the full schema)",
		st.runs, len(bases), st.fastAccepted)
	if st.fastAccepted == 0 {
		t.Error("no mutation was accepted: the mutator or the fast path is broken")
	}
}

// FuzzFastPathMutations: fast acceptance of a mutated envelope implies
// validity under the full schema.
func FuzzFastPathMutations(f *testing.F) {
	bases := mutationBases(f)
	for i := range 64 {
		f.Add([]byte{byte(i), byte(i * 7), byte(i * 13), 3, 1, 4, 1, 5, 9, 2, 6})
	}
	var st mutationStats
	f.Fuzz(func(t *testing.T, data []byte) {
		runMutation(t, bases, data, &st)
	})
}

// FuzzFastPathJSON: the same implication on arbitrary JSON documents.
func FuzzFastPathJSON(f *testing.F) {
	for _, text := range fastAccepted {
		f.Add([]byte(text))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := decodeNumbers(data)
		if err != nil {
			return
		}
		checkImplication(t, "json", v)
	})
}
