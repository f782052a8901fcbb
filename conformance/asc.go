package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/jcs"
)

// Outcome is the result of one file.
type Outcome string

// Outcomes.
const (
	Passed  Outcome = "pass"
	Failed  Outcome = "fail"
	Skipped Outcome = "skip"
)

// Kind is what a corpus file was recognised as.
type Kind string

// The kinds of ASC corpus files. Every kind except KindEnvelope is a
// fragment: a piece of an envelope or of a binding shown on its own.
const (
	KindEnvelope          Kind = "envelope"           // a complete minimum envelope
	KindPartialEnvelope   Kind = "partial_envelope"   // status present, minimum fields missing
	KindConditionFragment Kind = "condition_fragment" // an envelope-shaped conditions[] entry
	KindStatusObject      Kind = "status_object"      // a bare status object
	KindRetryFragment     Kind = "retry_fragment"     // {"retry": {...}}
	KindConfidence        Kind = "confidence_object"  // a confidence object, bare or wrapped
	KindDetailsFragment   Kind = "details_fragment"   // {"details": {...}}
	KindAuthenticity      Kind = "authenticity_block" // issuer, observed_by, authority, integrity
	KindChildOutcomes     Kind = "child_outcome_array"
	KindProblemDetails    Kind = "problem_details"
	KindMCPToolResult     Kind = "mcp_tool_result"
	KindUnrecognised      Kind = "unrecognised"
	KindNotJSON           Kind = "not_json"
)

// FileResult is the verdict on one file.
type FileResult struct {
	// Path is relative to the corpus directory, with forward slashes.
	Path    string
	Kind    Kind
	Outcome Outcome
	// Reason explains a failure or a skip, or notes what a pass covered.
	Reason string
	// Issues are the validation issues found, warnings included.
	Issues []asc.Issue
}

// Report is the result of a corpus run.
type Report struct {
	Dir                     string
	Files                   []FileResult
	Passed, Failed, Skipped int
}

// String is the summary line: "asc conformance: N passed, M failed, K skipped".
func (r *Report) String() string {
	return fmt.Sprintf("asc conformance: %d passed, %d failed, %d skipped", r.Passed, r.Failed, r.Skipped)
}

// Text lists every file with its verdict, then the summary line.
func (r *Report) Text() string {
	var b strings.Builder
	for _, f := range r.Files {
		fmt.Fprintf(&b, "%-4s %-20s %s", f.Outcome, f.Kind, f.Path)
		if f.Reason != "" {
			b.WriteString(": " + f.Reason)
		}
		b.WriteByte('\n')
		for _, is := range f.Issues {
			if f.Outcome == Failed || is.Level == asc.LevelError {
				b.WriteString("       " + is.String() + "\n")
			}
		}
	}
	b.WriteString(r.String() + "\n")
	return b.String()
}

// Result returns the result for a path relative to the corpus directory.
func (r *Report) Result(path string) (FileResult, bool) {
	i := slices.IndexFunc(r.Files, func(f FileResult) bool { return f.Path == path })
	if i < 0 {
		return FileResult{}, false
	}
	return r.Files[i], true
}

// ASC runs every *.json file under dir through package asc. A complete
// envelope passes when it validates without errors (warnings are allowed).
// A fragment is checked as what it is where a check exists: Problem Details
// must map back to an envelope, an MCP tool result must yield a status, and
// retry, confidence, details, status, authenticity, condition and
// child-outcome fragments must validate in place inside an otherwise valid
// envelope. Fragments without an applicable check (a partial envelope) are
// skipped with the reason. The error is non-nil only when dir cannot be
// walked; unreadable or malformed files are failures in the report.
func ASC(dir string) (*Report, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".json") {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("conformance: walking %s: %w", dir, err)
	}
	slices.Sort(paths)
	r := &Report{Dir: dir}
	for _, path := range paths {
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			rel = path
		}
		res := checkFile(path)
		res.Path = filepath.ToSlash(rel)
		r.Files = append(r.Files, res)
		switch res.Outcome {
		case Passed:
			r.Passed++
		case Failed:
			r.Failed++
		default:
			r.Skipped++
		}
	}
	return r, nil
}

func checkFile(path string) FileResult {
	data, err := os.ReadFile(path)
	if err != nil {
		return FileResult{Kind: KindNotJSON, Outcome: Failed, Reason: err.Error()}
	}
	v, err := jcs.Decode(data)
	if err != nil {
		return FileResult{Kind: KindNotJSON, Outcome: Failed, Reason: err.Error()}
	}
	switch v := v.(type) {
	case []any:
		if len(v) > 0 && !slices.ContainsFunc(v, func(item any) bool { return !hasMember(item, "code") }) {
			return inPlace(KindChildOutcomes, map[string]any{"causes": v},
				"checked as compact causal references in causes[]")
		}
	case map[string]any:
		return checkObject(data, v)
	}
	return FileResult{Kind: KindUnrecognised, Outcome: Skipped, Reason: "no ASC shape recognised"}
}

func checkObject(data []byte, m map[string]any) FileResult {
	status, hasStatus := m["status"].(map[string]any)
	_, hasContent := m["content"].([]any)
	typ, _ := m["type"].(string)
	switch {
	case strings.HasPrefix(typ, asc.ProblemTypePrefix) || m["agent_status"] != nil:
		return checkProblem(data)
	case hasContent:
		return checkMCP(data)
	case hasStatus && complete(m, status):
		return checkEnvelope(data)
	case hasStatus && status["kind"] == string(asc.KindCondition):
		return inPlace(KindConditionFragment, map[string]any{"conditions": []any{m}},
			"checked as an entry of conditions[]")
	case hasStatus:
		return FileResult{Kind: KindPartialEnvelope, Outcome: Skipped,
			Reason: "not a complete envelope (missing " + strings.Join(missing(m, status), ", ") + "); no check applies"}
	case onlyMembers(m, "retry"):
		return inPlace(KindRetryFragment, m, "")
	case onlyMembers(m, "confidence"):
		return inPlace(KindConfidence, m, "")
	case hasMember(m, "metric") && hasMember(m, "method"):
		return inPlace(KindConfidence, map[string]any{"confidence": m}, "")
	case onlyMembers(m, "details"):
		return inPlace(KindDetailsFragment, m, "")
	case onlyMembers(m, "issuer", "observed_by", "authority", "integrity"):
		return inPlace(KindAuthenticity, m, "checked at the envelope top level")
	case hasMember(m, "code") && hasMember(m, "name"):
		s := map[string]any{"kind": string(asc.KindStatus)}
		for k, v := range m {
			s[k] = v
		}
		return inPlace(KindStatusObject, map[string]any{"status": s}, "checked as the primary status (kind defaults to status)")
	}
	return FileResult{Kind: KindUnrecognised, Outcome: Skipped, Reason: "no ASC shape recognised"}
}

var minimumStatus = []string{"code", "name", "kind", "scope", "terminal"}

func complete(m, status map[string]any) bool { return len(missing(m, status)) == 0 }

func missing(m, status map[string]any) []string {
	var out []string
	for _, k := range []string{"spec_version", "occurred_at"} {
		if !hasMember(m, k) {
			out = append(out, k)
		}
	}
	for _, k := range minimumStatus {
		if !hasMember(status, k) {
			out = append(out, "status."+k)
		}
	}
	return out
}

func hasMember(v any, name string) bool {
	m, ok := v.(map[string]any)
	return ok && m[name] != nil
}

// onlyMembers reports whether m is non-empty and has no member outside names.
func onlyMembers(m map[string]any, names ...string) bool {
	if len(m) == 0 {
		return false
	}
	for k := range m {
		if !slices.Contains(names, k) {
			return false
		}
	}
	return true
}

func checkEnvelope(data []byte) FileResult {
	issues := asc.CheckJSON(data)
	return verdict(KindEnvelope, issues, "")
}

// syntheticBase is a valid minimum envelope into which fragments are placed,
// so that any error found belongs to the fragment.
func syntheticBase() map[string]any {
	return map[string]any{
		"spec_version": asc.SpecVersion,
		"status": map[string]any{"code": int(asc.Running), "name": asc.Running.Name(),
			"kind": string(asc.KindStatus), "scope": string(asc.ScopeTask), "terminal": false},
		"occurred_at": "2026-01-01T00:00:00Z",
	}
}

// inPlace validates members placed into the synthetic envelope.
func inPlace(kind Kind, members map[string]any, note string) FileResult {
	env := syntheticBase()
	for k, v := range members {
		env[k] = v
	}
	data, err := json.Marshal(env)
	if err != nil {
		return FileResult{Kind: kind, Outcome: Failed, Reason: err.Error()}
	}
	return verdict(kind, asc.CheckJSON(data), note)
}

func verdict(kind Kind, issues []asc.Issue, note string) FileResult {
	res := FileResult{Kind: kind, Outcome: Passed, Reason: note, Issues: issues}
	var errs, warns int
	for _, is := range issues {
		if is.Level == asc.LevelError {
			errs++
		} else {
			warns++
		}
	}
	if errs > 0 {
		res.Outcome = Failed
		res.Reason = fmt.Sprintf("%d error(s)", errs)
	} else if warns > 0 {
		res.Reason = strings.TrimPrefix(res.Reason+fmt.Sprintf("; %d warning(s)", warns), "; ")
	}
	return res
}

func checkProblem(data []byte) FileResult {
	// Problem Details carry no timestamp; a fixed one keeps reports stable.
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := asc.ParseProblem(data)
	if err == nil {
		var env *asc.Envelope
		if env, err = asc.FromProblem(p, at); err == nil {
			return verdict(KindProblemDetails, asc.Check(env), "mapped back to an envelope")
		}
	}
	return failure(KindProblemDetails, err)
}

func checkMCP(data []byte) FileResult {
	r, err := asc.ParseMCPToolResult(data)
	if err == nil {
		var st *asc.MCPStatus
		if st, err = asc.FromMCPToolResult(r); err == nil {
			if st.Complete() {
				return verdict(KindMCPToolResult, asc.Check(st.Envelope), "carries a full envelope")
			}
			return FileResult{Kind: KindMCPToolResult, Outcome: Passed,
				Reason: "carries only a partial status {code, name, scope}, not a full envelope"}
		}
	}
	return failure(KindMCPToolResult, err)
}

func failure(kind Kind, err error) FileResult {
	res := FileResult{Kind: kind, Outcome: Failed, Reason: err.Error()}
	var ve *asc.ValidationError
	if errors.As(err, &ve) {
		res.Issues = ve.Issues
	}
	return res
}
