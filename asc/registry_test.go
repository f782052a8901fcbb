package asc

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestRegistryCount(t *testing.T) {
	reg := Registry()
	if len(reg) != 43 || registeredCount != 43 {
		t.Fatalf("%d codes, want 43", len(reg))
	}
	perClass := map[Class]int{}
	for i, e := range reg {
		if i > 0 && reg[i-1].Code >= e.Code {
			t.Fatalf("not ascending at %v", e.Code)
		}
		if ClassOf(e.Code) != e.Class {
			t.Errorf("%v: class %s, first digit says %s", e.Code, e.Class, ClassOf(e.Code))
		}
		if e.EventOnly != (e.Class == ClassEvent) {
			t.Errorf("%v: event-only %t", e.Code, e.EventOnly)
		}
		perClass[e.Class]++
	}
	want := map[Class]int{ClassLifecycle: 4, ClassSuccess: 4, ClassInterrupted: 4, ClassRequestOrPolicy: 8,
		ClassTransientFailure: 7, ClassFatalOrIndeterminate: 6, ClassQualityOrVerification: 6, ClassEvent: 4}
	for c, n := range want {
		if perClass[c] != n {
			t.Errorf("class %s has %d codes, want %d", c, perClass[c], n)
		}
	}
}

// TestRegistryMatchesDataFile checks the generated lookups against
// registry.json itself.
func TestRegistryMatchesDataFile(t *testing.T) {
	var file struct {
		Codes []struct {
			Code     Code   `json:"code"`
			Name     string `json:"name"`
			Terminal string `json:"terminal"`
			GRPC     string `json:"grpc"`
			HTTP     []int  `json:"http"`
		} `json:"codes"`
	}
	if err := json.Unmarshal(readFile(t, "registry.json"), &file); err != nil {
		t.Fatal(err)
	}
	for _, c := range file.Codes {
		e, ok := Lookup(c.Code)
		if !ok || e.Name != c.Name || string(e.DefaultTerminal) != c.Terminal || e.GRPC != c.GRPC {
			t.Errorf("%d: Lookup = %+v", c.Code, e)
		}
		byName, ok := LookupName(c.Name)
		if !ok || byName.Code != c.Code {
			t.Errorf("LookupName(%s) = %v", c.Name, byName.Code)
		}
		if len(c.HTTP) > 0 && HTTPStatus(c.Code) != c.HTTP[0] {
			t.Errorf("%d: HTTPStatus = %d", c.Code, HTTPStatus(c.Code))
		}
	}
}

// TestRegistryMatchesSharedTranscription cross-checks against the shared
// transcription of the upstream tables when it is present.
func TestRegistryMatchesSharedTranscription(t *testing.T) {
	data, err := os.ReadFile("../../shared/conformance/asc/_derived/registry.json")
	if err != nil {
		t.Skip("shared corpus not present:", err)
	}
	var derived struct {
		Codes []struct {
			Code           Code    `json:"code"`
			Name           string  `json:"name"`
			Meaning        string  `json:"meaning"`
			GRPCProjection *string `json:"grpc_projection"`
		} `json:"codes"`
	}
	if err := json.Unmarshal(data, &derived); err != nil {
		t.Fatal(err)
	}
	if len(derived.Codes) != len(Registry()) {
		t.Fatalf("%d derived codes, %d registered", len(derived.Codes), len(Registry()))
	}
	for _, d := range derived.Codes {
		e, ok := Lookup(d.Code)
		if !ok || e.Name != d.Name || e.Meaning != d.Meaning {
			t.Errorf("%d: %+v", d.Code, e)
		}
		if d.GRPCProjection != nil && *d.GRPCProjection != e.GRPC {
			t.Errorf("%d: gRPC %q, want %q", d.Code, e.GRPC, *d.GRPCProjection)
		}
	}
}

func TestLookupReturnsCopies(t *testing.T) {
	e, _ := Lookup(RateLimited)
	e.HTTP[0] = 999
	e.Severities[0] = SeverityDebug
	again, _ := Lookup(RateLimited)
	if again.HTTP[0] != 429 || again.Severities[0] != SeverityWarning {
		t.Fatal("registry was modified through a returned entry")
	}
}

func TestLookupUnknown(t *testing.T) {
	if _, ok := Lookup(5999); ok {
		t.Error("5999 registered")
	}
	if _, ok := LookupName("NOPE"); ok {
		t.Error("NOPE registered")
	}
	if Code(5999).Name() != "" || Code(5999).Registered() {
		t.Error("5999 has a name")
	}
	if RateLimited.String() != "ASC-5001" || RateLimited.Name() != "RATE_LIMITED" {
		t.Error("RateLimited renders wrongly")
	}
}

func TestClassOf(t *testing.T) {
	tests := map[Code]Class{
		999: ClassUnknown, 1000: ClassLifecycle, 1999: ClassLifecycle, 2500: ClassSuccess, 3000: ClassInterrupted,
		4999: ClassRequestOrPolicy, 5555: ClassTransientFailure, 6123: ClassFatalOrIndeterminate,
		7777: ClassQualityOrVerification, 8999: ClassEvent, 9000: ClassExtension, 9999: ClassExtension,
		10000: ClassUnknown, -1: ClassUnknown, 0: ClassUnknown,
	}
	for c, want := range tests {
		if got := ClassOf(c); got != want {
			t.Errorf("ClassOf(%d) = %s, want %s", c, got, want)
		}
		if got := ClassOf(c).Title(); got == "" {
			t.Errorf("no title for %s", ClassOf(c))
		}
	}
}

func TestExtensionRangeOf(t *testing.T) {
	tests := map[Code]ExtensionRange{
		8999: RangeCore, 9000: RangeRegisteredExtension, 9499: RangeRegisteredExtension,
		9500: RangePrivate, 9799: RangePrivate, 9800: RangeExperimental, 9899: RangeExperimental,
		9900: RangeReserved, 9999: RangeReserved, 10000: RangeCore,
	}
	for c, want := range tests {
		if got := ExtensionRangeOf(c); got != want {
			t.Errorf("ExtensionRangeOf(%d) = %q, want %q", c, got, want)
		}
	}
}

func TestParseCode(t *testing.T) {
	good := map[string]Code{"5001": RateLimited, "ASC-5001": RateLimited, "asc-6005": ResultStateUnknown,
		"RATE_LIMITED": RateLimited, "rate_limited": RateLimited, " 9501 ": 9501}
	for in, want := range good {
		if got, err := ParseCode(in); err != nil || got != want {
			t.Errorf("ParseCode(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "999", "10000", "NOT_A_CODE", "50O1"} {
		if _, err := ParseCode(in); !errors.Is(err, ErrUnknownCode) {
			t.Errorf("ParseCode(%q) = %v", in, err)
		}
	}
}

func TestExplain(t *testing.T) {
	got := Explain(RateLimited)
	for _, want := range []string{"ASC-5001", "RATE_LIMITED", "transient_failure", "rate limit was reached",
		"contextual", "After delay", "status, condition or event", "429", "RESOURCE_EXHAUSTED", "warning"} {
		if !strings.Contains(got, want) {
			t.Errorf("Explain(5001) lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(Explain(PromptCacheHit), "event only") {
		t.Error("8000 not explained as event only")
	}
	unknown := Explain(5999)
	for _, want := range []string{"not registered", "transient_failure", "503", "assume neither retry safety nor terminality"} {
		if !strings.Contains(unknown, want) {
			t.Errorf("Explain(5999) lacks %q:\n%s", want, unknown)
		}
	}
	if !strings.Contains(Explain(9950), "must not be emitted") {
		t.Error("reserved range not explained")
	}
}
