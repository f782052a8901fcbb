package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ArsiaOptions selects what an ARSIA run covers.
type ArsiaOptions struct {
	// SuitesDir holds the upstream *.yaml suites.
	SuitesDir string
	// SharedDir is the upstream shared/ folder (test-vectors/, profiles/,
	// schemas/). Cases that need a missing file fail with the reason.
	SharedDir string
	// Categories, when non-empty, is an allow-list of case categories.
	Categories []string
	// Level, when non-empty and not "all", keeps only cases of that level.
	Level string
	// Live, when set, runs the cases upstream gates behind a live service
	// (skip_until: state-storage, certificate-authority, ...) against one:
	// nil is a pass, an error wrapping ErrLiveUnsupported leaves the case
	// skipped (with the error as its message), any other error fails it.
	// Without Live those cases are skipped.
	Live func(LiveCase) error
}

// LiveCase is a case gated behind a live service, as Live receives it.
type LiveCase struct {
	ID, Category, SkipUntil string
	// Input and Expected are the case's members, as decoded from YAML.
	Input, Expected map[string]any
}

// ErrLiveUnsupported: the live target cannot run this case.
var ErrLiveUnsupported = errors.New("conformance: no live service for this case")

// ArsiaResult is the verdict on one case, in the upstream report's shape.
type ArsiaResult struct {
	TestID     string   `json:"test_id"`
	Suite      string   `json:"suite"`
	Category   string   `json:"category"`
	Status     string   `json:"status"` // pass, fail, skip, error
	DurationMS float64  `json:"duration_ms"`
	Message    string   `json:"message"`
	SpecRef    string   `json:"spec_ref,omitempty"`
	RTMIDs     []string `json:"rtm_ids,omitempty"`
}

// ArsiaReport is the upstream JSON report shape.
type ArsiaReport struct {
	Target     string        `json:"target"`
	Level      string        `json:"level"`
	DurationMS float64       `json:"duration_ms"`
	Summary    ArsiaSummary  `json:"summary"`
	Results    []ArsiaResult `json:"results"`
}

// ArsiaSummary counts results by status.
type ArsiaSummary struct {
	Pass  int `json:"pass"`
	Fail  int `json:"fail"`
	Skip  int `json:"skip"`
	Error int `json:"error"`
	Total int `json:"total"`
}

// String is the closing line: "arsia conformance: N passed, M failed, K skipped".
// Errors count as failures.
func (r *ArsiaReport) String() string {
	return fmt.Sprintf("arsia conformance: %d passed, %d failed, %d skipped",
		r.Summary.Pass, r.Summary.Fail+r.Summary.Error, r.Summary.Skip)
}

// arsiaCase is one case of an upstream suite, decoded from YAML into generic
// values (map[string]any, []any, string, int, float64, bool, nil).
type arsiaCase struct {
	ID          string
	Description string
	Category    string
	Level       string
	Suite       string
	SpecRef     string
	SkipUntil   string
	RTMIDs      []string
	Input       map[string]any
	Expected    map[string]any
}

// arsiaEnv is what executors share: the vectors and keypairs, loaded once.
type arsiaEnv struct {
	sharedDir string
	vectors   map[string]map[string]any // by vector id
	keypairs  map[string]map[string]any // by agent id
	loadErr   error                     // why vectors/keypairs are missing
}

// arsiaExecutor runs one case. It returns nil when the case passes and an
// error saying what differed when it fails. A panic is reported as status
// "error".
type arsiaExecutor func(env *arsiaEnv, c *arsiaCase) error

// errUnsupported marks an operation the executor does not know: status error.
var errUnsupported = errors.New("unsupported operation")

// ArsiaClaimed lists the case categories this build claims to pass: every
// non-skipped case in them must pass, in tests and in CI. Today that is all
// eighteen categories of the upstream suites.
func ArsiaClaimed() []string {
	return []string{
		"actions", "assets", "authorization", "canonicalization", "certificates",
		"compliance", "discovery", "encryption", "errors", "idempotency", "identity",
		"onboarding", "routing", "schema-validation", "signing", "state", "validation",
		"version",
	}
}

// arsiaExecutorFor dispatches on the case category, as the reference runner
// does (not on the suite name).
func arsiaExecutorFor(category string) arsiaExecutor {
	switch category {
	case "actions":
		return execActions
	case "assets":
		return execAssets
	case "authorization":
		return execAuthorization
	case "canonicalization":
		return execCanonicalization
	case "certificates":
		return execCertificates
	case "compliance":
		return execCompliance
	case "discovery":
		return execDiscovery
	case "encryption":
		return execEncryption
	case "errors":
		return execErrors
	case "idempotency":
		return execIdempotency
	case "identity":
		return execIdentity
	case "onboarding":
		return execOnboarding
	case "routing":
		return execRouting
	case "schema-validation":
		return execSchemaValidation
	case "signing":
		return execSigning
	case "validation":
		return execValidation
	case "state":
		return execState
	case "version":
		return execVersion
	}
	return nil
}

// Arsia runs the upstream ARSIA suites.
func Arsia(opts ArsiaOptions) (*ArsiaReport, error) {
	return runArsia(opts, arsiaExecutorFor)
}

func runArsia(opts ArsiaOptions, executorFor func(category string) arsiaExecutor) (*ArsiaReport, error) {
	files, err := filepath.Glob(filepath.Join(opts.SuitesDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("conformance: no *.yaml suites in %s", opts.SuitesDir)
	}
	sort.Strings(files)
	env := loadArsiaEnv(opts.SharedDir)
	level := opts.Level
	if level == "" {
		level = "all"
	}
	report := &ArsiaReport{Target: "custos", Level: level, Results: []ArsiaResult{}}
	start := time.Now()
	for _, file := range files {
		cases, err := loadArsiaSuite(file)
		if err != nil {
			return nil, err
		}
		for _, c := range cases {
			if len(opts.Categories) > 0 && !slices.Contains(opts.Categories, c.Category) {
				continue
			}
			if level != "all" && c.Level != level {
				continue
			}
			if c.SkipUntil != "" && opts.Live != nil {
				report.Results = append(report.Results, runLiveCase(opts.Live, c))
				continue
			}
			report.Results = append(report.Results, runArsiaCase(env, c, executorFor(c.Category)))
		}
	}
	report.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	for _, r := range report.Results {
		switch r.Status {
		case "pass":
			report.Summary.Pass++
		case "fail":
			report.Summary.Fail++
		case "skip":
			report.Summary.Skip++
		default:
			report.Summary.Error++
		}
	}
	report.Summary.Total = len(report.Results)
	return report, nil
}

// runLiveCase runs one skip-gated case through live.
func runLiveCase(live func(LiveCase) error, c *arsiaCase) (res ArsiaResult) {
	res = ArsiaResult{TestID: c.ID, Suite: c.Suite, Category: c.Category, SpecRef: c.SpecRef, RTMIDs: c.RTMIDs}
	start := time.Now()
	defer func() {
		res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		if p := recover(); p != nil {
			res.Status, res.Message = "error", fmt.Sprintf("live runner raised %v", p)
		}
	}()
	switch err := live(LiveCase{ID: c.ID, Category: c.Category, SkipUntil: c.SkipUntil, Input: c.Input, Expected: c.Expected}); {
	case err == nil:
		res.Status, res.Message = "pass", "live"
	case errors.Is(err, ErrLiveUnsupported):
		res.Status, res.Message = "skip", "skipped until "+c.SkipUntil+": "+err.Error()
	default:
		res.Status, res.Message = "fail", "live: "+err.Error()
	}
	return res
}

func runArsiaCase(env *arsiaEnv, c *arsiaCase, exec arsiaExecutor) (res ArsiaResult) {
	res = ArsiaResult{TestID: c.ID, Suite: c.Suite, Category: c.Category, SpecRef: c.SpecRef, RTMIDs: c.RTMIDs}
	if c.SkipUntil != "" {
		res.Status, res.Message = "skip", "skipped until "+c.SkipUntil
		return res
	}
	if exec == nil {
		res.Status, res.Message = "error", "no executor for category "+c.Category
		return res
	}
	start := time.Now()
	defer func() {
		res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		if p := recover(); p != nil {
			res.Status, res.Message = "error", fmt.Sprintf("executor raised %v", p)
		}
	}()
	switch err := exec(env, c); {
	case err == nil:
		res.Status = "pass"
	case errors.Is(err, errUnsupported):
		res.Status, res.Message = "error", err.Error()
	default:
		res.Status, res.Message = "fail", err.Error()
	}
	return res
}

func loadArsiaSuite(path string) ([]*arsiaCase, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var suite struct {
		Name  string `yaml:"name"`
		Level string `yaml:"level"`
		Cases []struct {
			ID          string         `yaml:"id"`
			Description string         `yaml:"description"`
			Category    string         `yaml:"category"`
			Level       string         `yaml:"level"`
			SpecRef     string         `yaml:"spec_ref"`
			SkipUntil   string         `yaml:"skip_until"`
			RTMIDs      []string       `yaml:"rtm_ids"`
			Input       map[string]any `yaml:"input"`
			Expected    map[string]any `yaml:"expected"`
		} `yaml:"cases"`
	}
	if err := yaml.Unmarshal(data, &suite); err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", filepath.Base(path), err)
	}
	if suite.Level == "" {
		suite.Level = "core"
	}
	name := suite.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(path), ".yaml")
	}
	out := make([]*arsiaCase, 0, len(suite.Cases))
	for _, sc := range suite.Cases {
		c := &arsiaCase{ID: sc.ID, Description: sc.Description, Category: sc.Category, Level: sc.Level,
			Suite: name, SpecRef: sc.SpecRef, SkipUntil: sc.SkipUntil, RTMIDs: sc.RTMIDs,
			Input: sc.Input, Expected: sc.Expected}
		if c.Level == "" {
			c.Level = suite.Level
		}
		if c.Input == nil {
			c.Input = map[string]any{}
		}
		if c.Expected == nil {
			c.Expected = map[string]any{}
		}
		out = append(out, c)
	}
	return out, nil
}

func loadArsiaEnv(sharedDir string) *arsiaEnv {
	env := &arsiaEnv{sharedDir: sharedDir, vectors: map[string]map[string]any{}, keypairs: map[string]map[string]any{}}
	var problems []string
	var vf struct {
		Vectors []map[string]any `json:"vectors"`
	}
	if err := readJSONFile(filepath.Join(sharedDir, "test-vectors", "arsia-test-vectors.json"), &vf); err != nil {
		problems = append(problems, err.Error())
	}
	for _, v := range vf.Vectors {
		if id, ok := v["id"].(string); ok {
			env.vectors[id] = v
		}
	}
	var kf struct {
		Keypairs map[string]map[string]any `json:"keypairs"`
	}
	if err := readJSONFile(filepath.Join(sharedDir, "test-vectors", "keypairs.json"), &kf); err != nil {
		problems = append(problems, err.Error())
	}
	if kf.Keypairs != nil {
		env.keypairs = kf.Keypairs
	}
	if len(problems) > 0 {
		env.loadErr = errors.New(strings.Join(problems, "; "))
	}
	return env
}

// readJSONFile decodes a JSON file keeping numbers as json.Number, so that
// vector messages canonicalize exactly as written.
func readJSONFile(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// vector returns the vector named by input.vector_id.
func (env *arsiaEnv) vector(c *arsiaCase) (map[string]any, error) {
	id, _ := c.Input["vector_id"].(string)
	if id == "" {
		return nil, fmt.Errorf("%w: case has no input.vector_id", errUnsupported)
	}
	v, ok := env.vectors[id]
	if !ok {
		if env.loadErr != nil {
			return nil, fmt.Errorf("vector %s unavailable: %v", id, env.loadErr)
		}
		return nil, fmt.Errorf("vector %s not found", id)
	}
	return v, nil
}

// operation returns input.operation, or def when absent.
func (c *arsiaCase) operation(def string) string {
	if op, ok := c.Input["operation"].(string); ok && op != "" {
		return op
	}
	return def
}

// expectValidity applies the common assertion: expected.valid (default
// true) means no errors; false means at least one error and, when
// expected.error_contains is set, one error whose lower-cased text contains
// it.
func expectValidity(c *arsiaCase, errs []string) error {
	wantValid := true
	if v, ok := c.Expected["valid"].(bool); ok {
		wantValid = v
	}
	if wantValid {
		if len(errs) > 0 {
			return fmt.Errorf("expected valid, got errors: %s", strings.Join(errs, "; "))
		}
		return nil
	}
	if len(errs) == 0 {
		return errors.New("expected invalid, got no errors")
	}
	if kw, ok := c.Expected["error_contains"].(string); ok && kw != "" {
		for _, e := range errs {
			if strings.Contains(strings.ToLower(e), strings.ToLower(kw)) {
				return nil
			}
		}
		return fmt.Errorf("no error contains %q: %s", kw, strings.Join(errs, "; "))
	}
	return nil
}

// expectRaises applies expected.raises: true means err must be non-nil,
// otherwise err must be nil.
func expectRaises(c *arsiaCase, err error) (done bool, result error) {
	raises, _ := c.Expected["raises"].(bool)
	switch {
	case raises && err == nil:
		return true, errors.New("expected an error, got none")
	case raises:
		if kw, ok := c.Expected["error_contains"].(string); ok && !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(kw)) {
			return true, fmt.Errorf("error %q does not contain %q", err, kw)
		}
		return true, nil
	case err != nil:
		return true, fmt.Errorf("unexpected error: %v", err)
	}
	return false, nil
}

// expectEqual compares got with expected[key] after normalizing both
// through JSON (so int 1 equals float 1.0 and []string equals []any). It
// does nothing when the key is absent.
func expectEqual(c *arsiaCase, key string, got any) error {
	want, ok := c.Expected[key]
	if !ok {
		return nil
	}
	if !sameJSON(got, want) {
		return fmt.Errorf("%s: got %s, want %s", key, compactJSON(got), compactJSON(want))
	}
	return nil
}

func sameJSON(a, b any) bool {
	na, nb := normalize(a), normalize(b)
	return reflect.DeepEqual(na, nb)
}

func normalize(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return v
	}
	return out
}

func compactJSON(v any) string {
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return fmt.Sprint(f)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(data)
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
