package jsonx

import (
	"encoding/json"
	"math"
	"testing"
)

func TestMarshal(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{"a<b>&c", `"a<b>&c"`},
		{map[string]any{"z": 1, "a": "<"}, `{"a":"<","z":1}`},
		{json.RawMessage(`{"x" : 1}`), `{"x":1}`},
		{"\u2028", `"\u2028"`},
		{"\xff", `"\ufffd"`},
		{nil, `null`},
	} {
		got, err := Marshal(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("Marshal(%#v) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := Marshal(math.NaN()); err == nil {
		t.Error("Marshal(NaN) succeeded")
	}
	if _, err := Marshal(make(chan int)); err == nil {
		t.Error("Marshal(chan) succeeded")
	}
}

func TestAppendString(t *testing.T) {
	got := AppendString([]byte("x="), "<&\"\n")
	if want := `x="<&\"\n"`; string(got) != want {
		t.Errorf("AppendString = %s; want %s", got, want)
	}
}
