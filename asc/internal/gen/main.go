// Command gen turns asc/registry.json into asc/registry_gen.go.
//
// It is run by the go:generate line in package asc:
//
//	go run ./internal/gen -in registry.json -out registry_gen.go
//
// The registry is refused, with a non-zero exit status and a message naming
// the offending entry, when a code or name is duplicated, a name is not
// upper-case SNAKE_CASE, a code lies outside the core range 1000-8999, or a
// code's first digit disagrees with its declared class. The output is
// formatted with go/format and depends only on the input, so CI can
// regenerate and fail on any diff.
//
// The generator deliberately does not import package asc: a broken generated
// file must never stop the generator from repairing it.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	in := flag.String("in", "registry.json", "registry data file")
	out := flag.String("out", "registry_gen.go", "generated Go file")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	reg, err := decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if err := validate(reg); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	src, err := generate(reg, in)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

// registry mirrors registry.json. Unknown members are refused so that a typo
// in a field name cannot silently drop a fact.
type registry struct {
	Comment     string  `json:"_comment"`
	SpecVersion string  `json:"spec_version"`
	Codes       []entry `json:"codes"`
}

type entry struct {
	Code      int      `json:"code"`
	Name      string   `json:"name"`
	Class     string   `json:"class"`
	Meaning   string   `json:"meaning"`
	Terminal  string   `json:"terminal"`
	Retry     string   `json:"retry"`
	EventOnly bool     `json:"event_only"`
	GRPC      string   `json:"grpc"`
	Severity  []string `json:"severity"`
	HTTP      []int    `json:"http"`
	HTTPNote  string   `json:"http_note"`
}

func decode(r io.Reader) (*registry, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var reg registry
	if err := dec.Decode(&reg); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the registry object")
	}
	return &reg, nil
}

// classSlugs are the informative first-digit class slugs of ASC 0.1; index is
// the first digit. 9xxx is extension space and holds no registered code.
var classSlugs = [...]string{1: "lifecycle", 2: "success", 3: "interrupted", 4: "request_or_policy",
	5: "transient_failure", 6: "fatal_or_indeterminate", 7: "quality_or_verification", 8: "event"}

var (
	nameRE     = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	terminals  = []string{"yes", "no", "contextual", "not_applicable"}
	severities = []string{"critical", "error", "warning", "notice", "info", "debug"}
)

// validate reports the first problem found, naming the entry by index.
func validate(reg *registry) error {
	if reg.SpecVersion == "" {
		return errors.New("spec_version is missing")
	}
	if len(reg.Codes) == 0 {
		return errors.New("no codes")
	}
	codes := map[int]int{}
	names := map[string]int{}
	idents := map[string]int{}
	for i, e := range reg.Codes {
		at := fmt.Sprintf("codes[%d] (%d %s)", i, e.Code, e.Name)
		if e.Code < 1000 || e.Code > 8999 {
			return fmt.Errorf("%s: code %d outside the core range 1000-8999", at, e.Code)
		}
		if j, dup := codes[e.Code]; dup {
			return fmt.Errorf("%s: duplicate code %d (also codes[%d])", at, e.Code, j)
		}
		codes[e.Code] = i
		if !nameRE.MatchString(e.Name) {
			return fmt.Errorf("%s: name %q does not match %s", at, e.Name, nameRE)
		}
		if j, dup := names[e.Name]; dup {
			return fmt.Errorf("%s: duplicate name %s (also codes[%d])", at, e.Name, j)
		}
		names[e.Name] = i
		id := goName(e.Name)
		if j, dup := idents[id]; dup {
			return fmt.Errorf("%s: Go identifier %s collides with codes[%d]", at, id, j)
		}
		idents[id] = i
		digit := e.Code / 1000
		if e.Class != classSlugs[digit] {
			return fmt.Errorf("%s: class %q disagrees with first digit %d (want %q)", at, e.Class, digit, classSlugs[digit])
		}
		if e.EventOnly != (digit == 8) {
			return fmt.Errorf("%s: event_only must be %t for a %dxxx code", at, digit == 8, digit)
		}
		if strings.TrimSpace(e.Meaning) == "" {
			return fmt.Errorf("%s: meaning is empty", at)
		}
		if !slices.Contains(terminals, e.Terminal) {
			return fmt.Errorf("%s: terminal %q is not one of %v", at, e.Terminal, terminals)
		}
		if (e.Terminal == "not_applicable") != e.EventOnly {
			return fmt.Errorf("%s: terminal not_applicable is for event-only codes exactly", at)
		}
		if strings.TrimSpace(e.Retry) == "" {
			return fmt.Errorf("%s: retry hint is empty", at)
		}
		if len(e.Severity) == 0 {
			return fmt.Errorf("%s: severity is empty", at)
		}
		for _, s := range e.Severity {
			if !slices.Contains(severities, s) {
				return fmt.Errorf("%s: severity %q is not one of %v", at, s, severities)
			}
		}
		for _, h := range e.HTTP {
			if h < 100 || h > 599 {
				return fmt.Errorf("%s: HTTP status %d out of range", at, h)
			}
		}
	}
	return nil
}

// goName turns RATE_LIMITED into RateLimited.
func goName(name string) string {
	var b strings.Builder
	for part := range strings.SplitSeq(name, "_") {
		if part == "" {
			continue
		}
		b.WriteString(part[:1])
		b.WriteString(strings.ToLower(part[1:]))
	}
	return b.String()
}

func generate(reg *registry, source string) ([]byte, error) {
	codes := slices.Clone(reg.Codes)
	slices.SortFunc(codes, func(a, b entry) int { return a.Code - b.Code })

	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("// Code generated by go run ./internal/gen from %s; DO NOT EDIT.\n\n", source)
	p("package asc\n\n")
	p("// RegistryVersion is the ASC specification version the registry was taken from.\n")
	p("const RegistryVersion = %q\n\n", reg.SpecVersion)
	p("// The %d codes registered by ASC %s.\nconst (\n", len(codes), reg.SpecVersion)
	for _, e := range codes {
		p("\t// %s is %s: %s\n\t%s Code = %d\n", goName(e.Name), e.Name, e.Meaning, goName(e.Name), e.Code)
	}
	p(")\n\n")

	p("// registeredCount is the number of registered codes.\nconst registeredCount = %d\n\n", len(codes))

	p("// registeredCodes returns every registered code in ascending order.\n")
	p("func registeredCodes() []Code {\n\treturn []Code{\n")
	for _, e := range codes {
		p("\t\t%s,\n", goName(e.Name))
	}
	p("\t}\n}\n\n")

	p("// lookupCode returns a fresh copy of a registered entry, so callers can never\n")
	p("// modify the registry.\n")
	p("func lookupCode(c Code) (Entry, bool) {\n\tswitch c {\n")
	for _, e := range codes {
		p("\tcase %s:\n\t\treturn Entry{\n", goName(e.Name))
		p("\t\t\tCode: %s,\n\t\t\tName: %q,\n\t\t\tClass: %s,\n", goName(e.Name), e.Name, "Class"+goName(strings.ToUpper(e.Class)))
		p("\t\t\tMeaning: %q,\n", e.Meaning)
		p("\t\t\tDefaultTerminal: %s,\n", "Terminal"+goName(strings.ToUpper(e.Terminal)))
		p("\t\t\tRetryHint: %q,\n", e.Retry)
		p("\t\t\tEventOnly: %t,\n", e.EventOnly)
		p("\t\t\tGRPC: %q,\n", e.GRPC)
		sev := make([]string, len(e.Severity))
		for i, s := range e.Severity {
			sev[i] = "Severity" + goName(strings.ToUpper(s))
		}
		p("\t\t\tSeverities: []Severity{%s},\n", strings.Join(sev, ", "))
		httpCodes := make([]string, len(e.HTTP))
		for i, h := range e.HTTP {
			httpCodes[i] = strconv.Itoa(h)
		}
		p("\t\t\tHTTP: []int{%s},\n", strings.Join(httpCodes, ", "))
		p("\t\t\tHTTPNote: %q,\n", e.HTTPNote)
		p("\t\t}, true\n")
	}
	p("\t}\n\treturn Entry{}, false\n}\n\n")

	p("// lookupName maps a registered name to its code.\n")
	p("func lookupName(name string) (Code, bool) {\n\tswitch name {\n")
	for _, e := range codes {
		p("\tcase %q:\n\t\treturn %s, true\n", e.Name, goName(e.Name))
	}
	p("\t}\n\treturn 0, false\n}\n")

	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting generated code: %w", err)
	}
	return src, nil
}
