package jcs_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

func TestAppendValueCopy(t *testing.T) {
	doc := `{"b":[1,{"x":"é"},[]],"a":{"n":1.50,"f":false,"raw":null},"z":"s"}`
	v, err := jcs.Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	v.(map[string]any)["raw"] = json.RawMessage(`{"q":2, "p":1}`)
	want, err := jcs.CanonicalizeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	got, cp, err := (*jcs.Options)(nil).AppendValueCopy([]byte("prefix:"), v)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "prefix:"+string(want) {
		t.Fatalf("canonical bytes %s, want prefix:%s", got, want)
	}
	if !reflect.DeepEqual(cp, v) {
		t.Fatalf("copy differs:\n%#v\n%#v", cp, v)
	}
	// Mutating the original anywhere leaves the copy as it was hashed.
	m := v.(map[string]any)
	m["z"] = "changed"
	m["b"].([]any)[1].(map[string]any)["x"] = "changed"
	m["raw"].(json.RawMessage)[2] = 'Q'
	again, err := jcs.CanonicalizeValue(cp)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(want) {
		t.Fatalf("copy changed with the original: %s", again)
	}
}

func TestAppendValueCopyRejects(t *testing.T) {
	for _, v := range []any{
		map[string]any{"a": struct{}{}},
		[]any{json.Number("01")},
		map[string]any{"\xff": 1},
	} {
		out, cp, err := (*jcs.Options)(nil).AppendValueCopy([]byte("keep"), v)
		if err == nil || cp != nil || string(out) != "keep" {
			t.Errorf("%#v: out %q, copy %v, err %v", v, out, cp, err)
		}
	}
}

func TestDecodeWithStringTable(t *testing.T) {
	opts := &jcs.Options{Strings: jcs.NewStringTable("intent", "request", "from")}
	doc := []byte(`{"intent":"request","from":"agent:a.b","x":["request","other"],"e\u0078":"\u0072equest"}`)
	with, err := opts.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	without, err := jcs.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(with, without) {
		t.Fatalf("a string table changed the value:\n%#v\n%#v", with, without)
	}
	if _, err := opts.Decode([]byte(`{"intent":1,"intent":2}`)); err == nil {
		t.Fatal("duplicate names accepted with a string table")
	}
}

func TestShortIntegerNumbers(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "7": "7", "-123456789012345": "-123456789012345",
		"1234567890123456": "1234567890123456", "1.0": "1", "1e2": "100",
	} {
		got, err := jcs.CanonicalizeValue(json.Number(in))
		if err != nil || string(got) != want {
			t.Errorf("json.Number(%q): %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"01", "-01", "+1", "", "-", "1a", "00"} {
		if _, err := jcs.CanonicalizeValue(json.Number(bad)); err == nil {
			t.Errorf("json.Number(%q) accepted", bad)
		}
	}
}
