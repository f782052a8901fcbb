package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/custos-runtime/custos/internal/pyrepr"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

// decodeJSON decodes like the runtime does: numbers as json.Number.
func decodeJSON(t testing.TB, text string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", text, err)
	}
	return v
}

// testRegistry builds a registry over in-memory schema files.
func testRegistry(t testing.TB, files map[string]string) *registry {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, text := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(text)}
	}
	r, err := newRegistry(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func texts(errs []Error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.String()
	}
	return out
}

// The wanted texts below are what Python jsonschema 4.x prints for the same
// schema and instance.
func TestKeywordMessages(t *testing.T) {
	tests := []struct {
		name, schema, instance string
		want                   []string
	}{
		{"required", `{"required":["scope","a"]}`, `{}`,
			[]string{"<root>: 'scope' is a required property", "<root>: 'a' is a required property"}},
		{"enum", `{"properties":{"m":{"enum":["POST"]}}}`, `{"m":"GET"}`, []string{"/m: 'GET' is not one of ['POST']"}},
		{"enum mixed", `{"enum":[1.0,"a",null,true]}`, `2`, []string{"<root>: 2 is not one of [1.0, 'a', None, True]"}},
		{"const bool", `{"const":true}`, `false`, []string{"<root>: True was expected"}},
		{"const string", `{"const":"POST"}`, `"GET"`, []string{"<root>: 'POST' was expected"}},
		{"const object keeps schema order", `{"const":{"b":1,"a":2}}`, `1`, []string{"<root>: {'b': 1, 'a': 2} was expected"}},
		{"pattern", `{"pattern":"^[A-Z]{2}$"}`, `"eu"`, []string{`<root>: 'eu' does not match '^[A-Z]{2}$'`}},
		{"pattern agent", `{"pattern":"^agent:[a-z]+$"}`, `"bob"`,
			[]string{"<root>: 'bob' must be in agent:org.name format (e.g., agent:acme.billing)"}},
		{"pattern uuid", `{"pattern":"^[0-9a-f]{8}-[0-9a-f]{4}$"}`, `"x"`,
			[]string{"<root>: 'x' must be a UUID v4 (e.g., 550e8400-e29b-41d4-a716-446655440000)"}},
		{"pattern semver", `{"pattern":"^\\d+\\.\\d+$"}`, `"1"`, []string{"<root>: '1' must be a semver string (e.g., 1.0)"}},
		{"pattern capability", `{"pattern":"^[a-zA-Z][a-zA-Z0-9]*(\\.[a-zA-Z][a-zA-Z0-9]*)+$"}`, `"notes"`,
			[]string{"<root>: 'notes' must have ≥2 dot-separated segments (e.g., com.acme.billing.create-invoice)"}},
		{"minimum", `{"minimum":1}`, `0`, []string{"<root>: 0 is less than the minimum of 1"}},
		{"minimum float", `{"minimum":1.5}`, `1`, []string{"<root>: 1 is less than the minimum of 1.5"}},
		{"maximum", `{"maximum":10}`, `11`, []string{"<root>: 11 is greater than the maximum of 10"}},
		{"exclusiveMinimum", `{"exclusiveMinimum":0}`, `0`, []string{"<root>: 0 is less than or equal to the minimum of 0"}},
		{"exclusiveMaximum", `{"exclusiveMaximum":0}`, `0.0`, []string{"<root>: 0.0 is greater than or equal to the maximum of 0"}},
		{"minLength 1", `{"minLength":1}`, `""`, []string{"<root>: '' should be non-empty"}},
		{"minLength 2 counts code points", `{"minLength":2}`, `"é"`, []string{"<root>: 'é' is too short"}},
		{"maxLength", `{"maxLength":3}`, `"abcd"`, []string{"<root>: 'abcd' is too long"}},
		{"maxLength 0", `{"maxLength":0}`, `"a"`, []string{"<root>: 'a' is expected to be empty"}},
		{"minItems 1", `{"minItems":1}`, `[]`, []string{"<root>: [] should be non-empty"}},
		{"minItems 2", `{"minItems":2}`, `[1]`, []string{"<root>: [1] is too short"}},
		{"maxItems", `{"maxItems":1}`, `[1,2]`, []string{"<root>: [1, 2] is too long"}},
		{"minProperties", `{"minProperties":1}`, `{}`, []string{"<root>: {} should be non-empty"}},
		{"maxProperties", `{"maxProperties":1}`, `{"a":1,"b":2}`, []string{"<root>: {'a': 1, 'b': 2} has too many properties"}},
		{"multipleOf", `{"multipleOf":0.01}`, `150.123`, []string{"<root>: 150.123 is not a multiple of 0.01"}},
		{"multipleOf python float quirk", `{"multipleOf":0.01}`, `0.07`, []string{"<root>: 0.07 is not a multiple of 0.01"}},
		{"multipleOf exact enough", `{"multipleOf":0.01}`, `10.5`, nil},
		{"multipleOf int divisor float instance", `{"multipleOf":2}`, `3.0`, []string{"<root>: 3.0 is not a multiple of 2"}},
		{"multipleOf int", `{"multipleOf":2}`, `4`, nil},
		{"multipleOf overflow falls back to exact", `{"multipleOf":1e-300}`, `1e300`, []string{"<root>: 1e+300 is not a multiple of 1e-300"}},
		{"type", `{"type":"string"}`, `1`, []string{"<root>: 1 is not of type 'string'"}},
		{"type list", `{"type":["string","null"]}`, `1.5`, []string{"<root>: 1.5 is not of type 'string', 'null'"}},
		{"integer accepts integral float", `{"type":"integer"}`, `1.0`, nil},
		{"integer rejects fraction", `{"type":"integer"}`, `1.5`, []string{"<root>: 1.5 is not of type 'integer'"}},
		{"bool is not a number", `{"type":"number"}`, `true`, []string{"<root>: True is not of type 'number'"}},
		{"type and enum both reported", `{"type":"string","enum":["a"]}`, `1`,
			[]string{"<root>: 1 is not of type 'string'", "<root>: 1 is not one of ['a']"}},
		{"enum and pattern both reported", `{"properties":{"c":{"pattern":"^[A-Z]{3}$","enum":["EUR"]}}}`, `{"c":"eur"}`,
			[]string{"/c: 'eur' does not match '^[A-Z]{3}$'", "/c: 'eur' is not one of ['EUR']"}},
		{"additionalProperties one", `{"properties":{"a":{}},"additionalProperties":false}`, `{"a":1,"x":2}`,
			[]string{"<root>: Additional properties are not allowed ('x' was unexpected)"}},
		{"additionalProperties several", `{"additionalProperties":false}`, `{"b":1,"a":2}`,
			[]string{"<root>: Additional properties are not allowed ('a', 'b' were unexpected)"}},
		{"additionalProperties with patterns", `{"patternProperties":{"^x":{}},"additionalProperties":false}`, `{"y":1,"z":2}`,
			[]string{"<root>: 'y', 'z' do not match any of the regexes: '^x'"}},
		{"uniqueItems", `{"uniqueItems":true}`, `[1,1.0]`, []string{"<root>: [1, 1.0] has non-unique elements"}},
		{"uniqueItems bool is not int", `{"uniqueItems":true}`, `[1,true]`, nil},
		{"anyOf", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `1.5`,
			[]string{"<root>: 1.5 is not valid under any of the given schemas"}},
		{"oneOf none", `{"oneOf":[{"type":"string"}]}`, `1`, []string{"<root>: 1 is not valid under any of the given schemas"}},
		{"oneOf several", `{"oneOf":[{"type":"integer"},{"minimum":0}]}`, `5`,
			[]string{"<root>: 5 is valid under each of {'minimum': 0}, {'type': 'integer'}"}},
		{"not", `{"not":{"type":"string","minLength":1}}`, `"x"`,
			[]string{"<root>: 'x' should not be valid under {'type': 'string', 'minLength': 1}"}},
		{"allOf reports leaves", `{"allOf":[{"required":["a"]},{"properties":{"b":{"type":"string"}}}]}`, `{"b":1}`,
			[]string{"<root>: 'a' is a required property", "/b: 1 is not of type 'string'"}},
		{"if then reports leaves", `{"if":{"const":1},"then":{"const":2}}`, `1`, []string{"<root>: 2 was expected"}},
		{"ref reports leaves", `{"$defs":{"n":{"maximum":3}},"properties":{"a":{"$ref":"#/$defs/n"}}}`, `{"a":4}`,
			[]string{"/a: 4 is greater than the maximum of 3"}},
		{"propertyNames on the object", `{"propertyNames":{"pattern":"^a"}}`, `{"b":1}`, []string{"<root>: 'b' does not match '^a'"}},
		{"dependentRequired", `{"dependentRequired":{"a":["b"]}}`, `{"a":1}`, []string{"<root>: 'b' is a dependency of 'a'"}},
		{"contains", `{"contains":{"type":"string"}}`, `[1]`, []string{"<root>: [1] does not contain items matching the given schema"}},
		{"minContains", `{"contains":{"type":"string"},"minContains":2}`, `["a",1]`,
			[]string{"<root>: Too few items match the given schema (expected at least 2 but only 1 matched)"}},
		{"maxContains", `{"contains":{"type":"string"},"maxContains":1}`, `["a","b"]`,
			[]string{"<root>: Too many items match the given schema (expected at most 1)"}},
		{"false schema", `{"properties":{"a":false}}`, `{"a":1}`, []string{"/a: False schema does not allow 1"}},
		{"format is not asserted", `{"format":"email"}`, `"x"`, nil},
		{"sorted by pointer, indices numerically", `{"items":{"type":"string"},"minItems":20}`,
			`[1,"a","a","a","a","a","a","a","a","a",2]`,
			[]string{"<root>: [1, 'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a', 2] is too short", "/0: 1 is not of type 'string'", "/10: 2 is not of type 'string'"}},
		{"pointer escaping", `{"properties":{"a/b~c":{"type":"string"}}}`, `{"a/b~c":1}`, []string{"/a~1b~0c: 1 is not of type 'string'"}},
		{"property named like a keyword", `{"properties":{"type":{"enum":["x"]},"enum":{"type":"integer"}}}`, `{"type":"x","enum":1}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testRegistry(t, map[string]string{"test.schema.json": `{"$schema":"https://json-schema.org/draft/2020-12/schema",` + tt.schema[1:]})
			errs, err := r.validate(decodeJSON(t, tt.instance), "test.schema.json")
			if err != nil {
				t.Fatal(err)
			}
			if got := texts(errs); !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestErrorFields(t *testing.T) {
	r := testRegistry(t, map[string]string{"t.json": `{"properties":{"a":{"pattern":"^x$"}},"required":["b"]}`})
	errs, err := r.validate(decodeJSON(t, `{"a":"y"}`), "t.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []Error{
		{Pointer: "", Keyword: "required", Message: "'b' is a required property", Params: map[string]any{"property": "b"}},
		{Pointer: "/a", Keyword: "pattern", Message: "'y' does not match '^x$'", Params: map[string]any{"pattern": "^x$"}},
	}
	if fmt.Sprint(errs) != fmt.Sprint(want) {
		t.Errorf("got  %+v\nwant %+v", errs, want)
	}
}

func TestErrorString(t *testing.T) {
	for _, tt := range []struct {
		e    Error
		want string
	}{
		{Error{Message: "'from' is a required property"}, "<root>: 'from' is a required property"},
		{Error{Pointer: "/compliance/retention_days", Message: "365 is less than the minimum of 1827"},
			"/compliance/retention_days: 365 is less than the minimum of 1827"},
		{Error{Pointer: "/a~1b/0", Message: "m"}, "/a~1b/0: m"},
	} {
		if got := tt.e.String(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// References resolve by the last path segment of the URL when no $id
// matches, and by $id when one does, as the reference SDK's registry does.
func TestRefResolution(t *testing.T) {
	r := testRegistry(t, map[string]string{
		"a.schema.json": `{"$id":"https://example.com/a/v1.json","type":"object","properties":{
			"x":{"$ref":"b.schema.json#/$defs/small"},
			"y":{"$ref":"https://example.com/b/v1.json#/$defs/small"},
			"z":{"$ref":"c.schema.json"}}}`,
		"b.schema.json": `{"$id":"https://example.com/b/v1.json","$defs":{"small":{"maximum":1}}}`,
		"c.schema.json": `{"$id":"c.schema.json","properties":{"n":{"$ref":"b.schema.json#/$defs/small"}}}`,
	})
	errs, err := r.validate(decodeJSON(t, `{"x":2,"y":3,"z":{"n":4}}`), "a.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/x: 2 is greater than the maximum of 1",
		"/y: 3 is greater than the maximum of 1",
		"/z/n: 4 is greater than the maximum of 1",
	}
	if got := texts(errs); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	errs, err = r.validate(decodeJSON(t, `5`), "b.schema.json#/$defs/small")
	if err != nil || len(errs) != 1 {
		t.Errorf("fragment ref: %v %v", errs, err)
	}
}

func TestUnknownRef(t *testing.T) {
	for _, ref := range []string{"", "nope.schema.json", "../schemas/arsia-message.schema.json", "arsia-message.schema.json/"} {
		if _, err := Validate(map[string]any{}, ref); !errors.Is(err, ErrUnknownSchema) {
			t.Errorf("%q: got %v, want ErrUnknownSchema", ref, err)
		}
	}
	if _, err := Validate(map[string]any{}, "arsia-common.schema.json#/$defs/no-such-def"); err == nil {
		t.Error("a missing fragment compiled")
	}
	r := testRegistry(t, map[string]string{"t.json": `{"$ref":"missing.json"}`})
	if _, err := r.validate(1, "t.json"); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("dangling $ref: got %v", err)
	}
}

func TestEmbeddedSchemas(t *testing.T) {
	names := Names()
	if len(names) != 31 || !slices.IsSorted(names) {
		t.Fatalf("Names() = %d names, sorted %v", len(names), slices.IsSorted(names))
	}
	for _, name := range names {
		data, ok := File(name)
		if !ok || !json.Valid(data) {
			t.Errorf("%s: File ok=%v valid=%v", name, ok, json.Valid(data))
		}
		if _, err := Validate(nil, name); err != nil {
			t.Errorf("%s does not compile: %v", name, err)
		}
	}
	a, _ := File(EnvelopeSchema)
	a[0] = 'X'
	if b, _ := File(EnvelopeSchema); bytes.Equal(a, b) {
		t.Error("File returned the embedded bytes themselves")
	}
	if _, ok := File("nope.json"); ok {
		t.Error("File found a missing schema")
	}
}

const validEnvelope = `{"v":"1.0","id":"550e8400-e29b-41d4-a716-446655440000","ts":"2026-03-24T10:00:00.000Z",
	"from":"agent:acme.billing","to":"agent:acme.crm","intent":"event",
	"payload":{"type":"com.acme.billing/invoice-paid","data":{"invoice":"INV-1"}}}`

func TestValidateEnvelope(t *testing.T) {
	if errs := ValidateEnvelope(decodeJSON(t, validEnvelope)); len(errs) != 0 {
		t.Fatalf("valid envelope: %q", texts(errs))
	}
	env := decodeJSON(t, validEnvelope).(map[string]any)
	delete(env, "from")
	env["id"] = "not-a-uuid"
	env["extra"] = true
	want := []string{
		"<root>: 'from' is a required property",
		"<root>: Additional properties are not allowed ('extra' was unexpected)",
		"/id: 'not-a-uuid' must be a UUID v4 (e.g., 550e8400-e29b-41d4-a716-446655440000)",
	}
	if got := texts(ValidateEnvelope(env)); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := texts(ValidateEnvelope([]any{})); !slices.Equal(got, []string{"<root>: [] is not of type 'object'"}) {
		t.Errorf("array envelope: %q", got)
	}
}

// Values decoded from YAML (float64, int) validate like json.Number.
func TestGoNumberTypes(t *testing.T) {
	r := testRegistry(t, map[string]string{"t.json": `{"properties":{
		"i":{"type":"integer","maximum":10},"m":{"multipleOf":0.01},"f":{"type":"string"}}}`})
	errs, err := r.validate(map[string]any{"i": 11, "m": 0.07, "f": 2.5}, "t.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/f: 2.5 is not of type 'string'",
		"/i: 11 is greater than the maximum of 10",
		"/m: 0.07 is not a multiple of 0.01",
	}
	if got := texts(errs); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	errs, _ = r.validate(map[string]any{"i": int64(3), "m": uint8(2), "f": "x"}, "t.json")
	if len(errs) != 0 {
		t.Errorf("Go integers: %q", texts(errs))
	}
}

func TestNonJSONValues(t *testing.T) {
	for _, v := range []any{
		math.NaN(),
		map[string]any{"payload": map[string]any{"x": math.Inf(1)}},
		[]any{json.Number("01")},
		map[string]any{"a": []string{"x"}},
		struct{}{},
	} {
		errs, err := Validate(v, EnvelopeSchema)
		if err != nil || len(errs) == 0 {
			t.Errorf("%v: errs=%q err=%v", v, texts(errs), err)
			continue
		}
		if errs[0].Keyword != "type" || !strings.HasSuffix(errs[0].Message, "is not a JSON value") {
			t.Errorf("%v: %q", v, texts(errs))
		}
	}
}

func TestConcurrentValidate(t *testing.T) {
	good := decodeJSON(t, validEnvelope)
	bad := decodeJSON(t, `{"v":"x","payload":{"type":1}}`)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				inst, ref := good, EnvelopeSchema
				if i%2 == 1 {
					inst = bad
				}
				if i%4 == 2 {
					inst, ref = "agent:acme.billing", "arsia-common.schema.json#/$defs/agent-id"
				}
				errs, err := Validate(inst, ref)
				if err != nil || (i%2 == 1) != (len(errs) > 0) {
					t.Errorf("goroutine %d: %q %v", i, texts(errs), err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestPyRepr(t *testing.T) {
	tenth := 0.1 // a variable, so that 0.1+0.2 is computed in float64
	for _, tt := range []struct {
		v    any
		want string
	}{
		{nil, "None"}, {true, "True"}, {false, "False"},
		{"it's", `"it's"`}, {`a"b'c`, `'a"b\'c'`}, {`a"b`, `'a"b'`},
		{"\x00\x7f\u0085\u00a0\u00ad\u00e9\u200b\U0001F600\n\r\t\\\ufeff\U000e0001", `'\x00\x7f\x85\xa0\xadé\u200b😀\n\r\t\\\ufeff\U000e0001'`},
		{json.Number("1"), "1"}, {json.Number("-0"), "0"}, {json.Number("123456789012345678901234567890"), "123456789012345678901234567890"},
		{json.Number("1.0"), "1.0"}, {json.Number("1E2"), "100.0"}, {json.Number("-0.0"), "-0.0"}, {json.Number("1e400"), "inf"},
		{json.Number("150.123"), "150.123"}, {json.Number("1e16"), "1e+16"}, {json.Number("1e15"), "1000000000000000.0"},
		{0.0001, "0.0001"}, {0.00001, "1e-05"}, {2.5e-7, "2.5e-07"}, {tenth + 0.2, "0.30000000000000004"},
		{123456789012345678.0, "1.2345678901234568e+17"}, {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
		{-1.5, "-1.5"}, {100.0, "100.0"}, {math.NaN(), "nan"}, {math.Inf(-1), "-inf"}, {float32(0.5), "0.5"},
		{42, "42"}, {int64(-7), "-7"}, {uint64(math.MaxUint64), "18446744073709551615"},
		{[]any{}, "[]"}, {[]any{json.Number("1"), "a", nil, []any{true}}, "[1, 'a', None, [True]]"},
		{map[string]any{}, "{}"}, {map[string]any{"b": 1, "a": []any{2.5}}, "{'a': [2.5], 'b': 1}"},
		{&pyrepr.Object{Keys: []string{"b", "a"}, Values: []any{json.Number("1"), "x"}}, "{'b': 1, 'a': 'x'}"},
	} {
		if got := pyrepr.Repr(tt.v); got != tt.want {
			t.Errorf("pyrepr.Repr(%#v) = %s, want %s", tt.v, got, tt.want)
		}
	}
}

func TestPyIsMultiple(t *testing.T) {
	num := func(s string) pyNum {
		n, ok := toPyNum(json.Number(s))
		if !ok {
			t.Fatalf("toPyNum(%s)", s)
		}
		return n
	}
	for _, tt := range []struct {
		x, d string
		want bool
	}{
		{"0.07", "0.01", false}, // 7.000000000000001
		{"0.5", "0.01", true},
		{"10.505", "0.01", false},
		{"1.123456789", "0.00000001", false},
		{"1.12345678", "0.00000001", false}, // 112345677.99999999
		{"0.25", "0.00000001", true},
		{"3", "0.5", true},
		{"3.0", "2", false},
		{"4.0", "2", true},
		{"12345678901234567890123", "3", true},
		{"1e308", "0.01", false}, // q overflows: exact fallback
		{"1e300", "1e-300", false},
		{"1e400", "0.01", false}, // an infinite instance is never a multiple
	} {
		if got := pyIsMultiple(num(tt.x), num(tt.d)); got != tt.want {
			t.Errorf("%s multipleOf %s = %v, want %v", tt.x, tt.d, got, tt.want)
		}
	}
}

func TestIsJSONNumber(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-12", "1.5", "1e5", "1E+5", "-0.0e-0"} {
		if !isJSONNumber(s) {
			t.Errorf("%q rejected", s)
		}
	}
	for _, s := range []string{"", "-", "01", "1.", ".5", "1e", "+1", "NaN", "0x10", "1.5.5", " 1"} {
		if isJSONNumber(s) {
			t.Errorf("%q accepted", s)
		}
	}
}
