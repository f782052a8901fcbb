package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/jcs"
	"github.com/custos-runtime/custos/store/memstore"
)

// AAISResult is the verdict on one check.
type AAISResult struct {
	Name    string
	Outcome string // "pass", "fail", "skip"
	Reason  string
}

// AAISReport is the result of an AAIS corpus run.
type AAISReport struct {
	Dir                     string
	Results                 []AAISResult
	Passed, Failed, Skipped int
}

// String is the summary line: "aais conformance: N passed, M failed, K skipped".
func (r *AAISReport) String() string {
	return fmt.Sprintf("aais conformance: %d passed, %d failed, %d skipped", r.Passed, r.Failed, r.Skipped)
}

// Text lists every check with its verdict, then the summary line.
func (r *AAISReport) Text() string {
	var b strings.Builder
	for _, res := range r.Results {
		fmt.Fprintf(&b, "%-4s %s", res.Outcome, res.Name)
		if res.Reason != "" {
			b.WriteString(": " + res.Reason)
		}
		b.WriteByte('\n')
	}
	b.WriteString(r.String() + "\n")
	return b.String()
}

// Result returns the result of the named check.
func (r *AAISReport) Result(name string) (AAISResult, bool) {
	i := slices.IndexFunc(r.Results, func(x AAISResult) bool { return x.Name == name })
	if i < 0 {
		return AAISResult{}, false
	}
	return r.Results[i], true
}

// add records one verdict: err nil is a pass with note as the reason, an
// aaisSkip error a skip, any other error a failure.
func (r *AAISReport) add(name, note string, err error) {
	res := AAISResult{Name: name, Outcome: string(Passed), Reason: note}
	var skip aaisSkip
	switch {
	case errors.As(err, &skip):
		res.Outcome, res.Reason = string(Skipped), skip.reason
	case err != nil:
		res.Outcome, res.Reason = string(Failed), err.Error()
	}
	r.Results = append(r.Results, res)
	switch res.Outcome {
	case string(Passed):
		r.Passed++
	case string(Failed):
		r.Failed++
	default:
		r.Skipped++
	}
}

type aaisSkip struct{ reason string }

func (s aaisSkip) Error() string { return "skipped: " + s.reason }

// aaisDefaultNow is the authority's clock for a case that names none.
const aaisDefaultNow = "2026-08-30T18:01:00Z"

// aaisCorpus is conformance/cases.json.
type aaisCorpus struct {
	AAIS            string     `json:"aais"`
	RequestFixture  string     `json:"request_fixture"`
	DecisionFixture string     `json:"decision_fixture"`
	ActionDigest    string     `json:"action_digest"`
	Cases           []aaisCase `json:"cases"`
}

type aaisCase struct {
	Name     string `json:"name"`
	Now      string `json:"now,omitempty"`
	Mutation string `json:"mutation,omitempty"`
	Outcome  string `json:"outcome"`
}

// aaisEnv is what every check starts from: the corpus and its two parsed
// fixtures (nil, with fixErr, when they do not load).
type aaisEnv struct {
	dir            string
	corpus         aaisCorpus
	reqRaw, decRaw []byte
	reqMsg, decMsg *aais.Message
	fixErr         error
}

// AAIS runs the corpus in dir (the folder holding conformance/cases.json,
// examples/ and schema/, e.g. ../shared/conformance/aais). The error is
// non-nil only when dir or cases.json cannot be read or parsed.
//
// It checks that both fixtures parse and validate, that the digest vector
// reproduces, that the embedded schema is the corpus schema byte for byte,
// runs every lifecycle case of cases.json on a fresh store/memstore through
// an aais.Authority with a manual clock, and runs the additional checks of
// the AAIS conformance README (negative mutations, key order, snapshots,
// extensions passthrough). Messages, generated ids and timestamp precision
// are never compared; every receipt the authority emits must re-parse.
func AAIS(dir string) (*AAISReport, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("conformance: aais corpus: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("conformance: aais corpus: %s is not a directory", dir)
	}
	path := filepath.Join(dir, "conformance", "cases.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("conformance: aais corpus: %w", err)
	}
	if _, err := jcs.Decode(data); err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	env := &aaisEnv{dir: dir}
	if err := dec.Decode(&env.corpus); err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", path, err)
	}

	r := &AAISReport{Dir: dir}
	r.add("corpus_header", "", env.checkHeader())
	r.add("fixtures_valid", "", env.loadFixtures())
	r.add("digest_vector", "", env.needFixtures(env.checkDigestVector))
	r.add("embedded_schema", "", env.checkSchema())
	for _, c := range env.corpus.Cases {
		var note string
		err := env.needFixtures(func() error {
			var err error
			note, err = env.runCase(c)
			return err
		})
		r.add("case/"+c.Name, note, err)
	}
	for _, chk := range []struct {
		name string
		fn   func() (string, error)
	}{
		{"check/wrong_digest", env.checkWrongDigest},
		{"check/missing_exit_choice", env.checkMissingExit},
		{"check/duplicate_tuple", env.checkDuplicateTuple},
		{"check/edited_action_decision", env.checkEditedAction},
		{"check/deny_session_scope", env.checkDenySession},
		{"check/key_order", env.checkKeyOrder},
		{"check/snapshot_restore", env.checkSnapshotRestore},
		{"check/snapshot_expiry", env.checkSnapshotExpiry},
		{"check/extensions_passthrough", env.checkExtensions},
	} {
		var note string
		err := env.needFixtures(func() error {
			var err error
			note, err = chk.fn()
			return err
		})
		r.add(chk.name, note, err)
	}
	return r, nil
}

func (e *aaisEnv) needFixtures(fn func() error) error {
	if e.fixErr != nil {
		return fmt.Errorf("fixtures did not load: %v", e.fixErr)
	}
	return fn()
}

func (e *aaisEnv) checkHeader() error {
	c := e.corpus
	var errs []error
	if c.AAIS != aais.Version {
		errs = append(errs, fmt.Errorf("aais %q, want %q", c.AAIS, aais.Version))
	}
	if !jcs.IsDigest(c.ActionDigest) {
		errs = append(errs, fmt.Errorf("action_digest %q is not a sha256 digest", c.ActionDigest))
	}
	if len(c.Cases) == 0 {
		errs = append(errs, errors.New("no cases"))
	}
	seen := map[string]bool{}
	for i, tc := range c.Cases {
		if tc.Name == "" || seen[tc.Name] {
			errs = append(errs, fmt.Errorf("case %d: empty or duplicate name %q", i, tc.Name))
		}
		seen[tc.Name] = true
	}
	return errors.Join(errs...)
}

// corpusPath resolves a fixture path against the corpus root, refusing one
// that leaves it.
func (e *aaisEnv) corpusPath(p string) (string, error) {
	if p == "" || !filepath.IsLocal(filepath.FromSlash(p)) {
		return "", fmt.Errorf("fixture path %q is not inside the corpus", p)
	}
	return filepath.Join(e.dir, filepath.FromSlash(p)), nil
}

func (e *aaisEnv) loadFixtures() error {
	load := func(rel string, want aais.Type) ([]byte, *aais.Message, error) {
		path, err := e.corpusPath(rel)
		if err != nil {
			return nil, nil, err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		m, err := aais.Parse(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", rel, err)
		}
		if m.Type != want {
			return nil, nil, fmt.Errorf("%s: type %s, want %s", rel, m.Type, want)
		}
		return data, m, nil
	}
	var err1, err2 error
	e.reqRaw, e.reqMsg, err1 = load(e.corpus.RequestFixture, aais.TypeRequested)
	e.decRaw, e.decMsg, err2 = load(e.corpus.DecisionFixture, aais.TypeDecided)
	e.fixErr = errors.Join(err1, err2)
	if e.fixErr == nil && e.decMsg.Decision.RequestID != e.reqMsg.Request.ID {
		e.fixErr = fmt.Errorf("decision fixture names request %q, request fixture is %q",
			e.decMsg.Decision.RequestID, e.reqMsg.Request.ID)
	}
	return e.fixErr
}

func (e *aaisEnv) checkDigestVector() error {
	// The raw bytes of request.action, exactly as in the file.
	var top struct {
		Request struct {
			Action json.RawMessage `json:"action"`
		} `json:"request"`
	}
	if err := json.Unmarshal(e.reqRaw, &top); err != nil || len(top.Request.Action) == 0 {
		return fmt.Errorf("request.action: %v", err)
	}
	got, err := aais.ActionDigest(top.Request.Action)
	if err != nil {
		return err
	}
	want := e.corpus.ActionDigest
	var errs []error
	if got != want {
		errs = append(errs, fmt.Errorf("recomputed %s, cases.json %s", got, want))
	}
	if d := e.reqMsg.Request.ActionDigest; d != want {
		errs = append(errs, fmt.Errorf("request.action_digest %s, cases.json %s", d, want))
	}
	if d := e.decMsg.Decision.ActionDigest; d != want {
		errs = append(errs, fmt.Errorf("decision.action_digest %s, cases.json %s", d, want))
	}
	return errors.Join(errs...)
}

func (e *aaisEnv) checkSchema() error {
	data, err := os.ReadFile(filepath.Join(e.dir, "schema", "v1", "aais-1.0.schema.json"))
	if err != nil {
		return err
	}
	if !bytes.Equal(data, aais.Schema()) {
		return fmt.Errorf("embedded schema (%d bytes) differs from schema/v1/aais-1.0.schema.json (%d bytes)", len(aais.Schema()), len(data))
	}
	return nil
}

// aaisClock is a manual clock for the authority.
type aaisClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *aaisClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *aaisClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// aaisRun is one fresh authority over a fresh memstore holding one request.
type aaisRun struct {
	ctx     context.Context
	store   *memstore.Store
	clock   *aaisClock
	auth    *aais.Authority
	req     *aais.Request
	created *aais.Message
}

// newRun records req on a fresh store, with the clock at its created_at.
func (e *aaisEnv) newRun(req *aais.Request) (*aaisRun, error) {
	run := &aaisRun{ctx: context.Background(), store: memstore.New(), clock: &aaisClock{t: req.CreatedAt.Time()}}
	stream := e.reqMsg.Stream
	var err error
	run.auth, err = aais.NewAuthority(run.store, &aais.AuthorityOptions{Now: run.clock.Now, Stream: stream})
	if err != nil {
		return nil, err
	}
	ev, created, err := run.auth.Create(run.ctx, req)
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	if !created {
		return nil, errors.New("create: request not created on a fresh store")
	}
	if err := aaisReparse(ev); err != nil {
		return nil, fmt.Errorf("approval.requested event: %w", err)
	}
	run.req, run.created = ev.Request, ev
	return run, nil
}

// decide submits d with its own actor as the authenticated one (the
// fixture's actor is authenticated_by "local-session") and checks the
// receipt.
func (run *aaisRun) decide(d *aais.Decision, current []byte) (*aais.Message, error) {
	m, err := run.auth.Decide(run.ctx, d, d.Actor, current)
	if err != nil {
		return nil, fmt.Errorf("Decide(%s): %w", d.ID, err)
	}
	if m == nil || m.Type != aais.TypeResolved || m.Resolution == nil {
		return nil, fmt.Errorf("Decide(%s): no receipt", d.ID)
	}
	if err := aaisReparse(m); err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	res := m.Resolution
	switch {
	case res.RequestID != run.req.ID:
		return nil, fmt.Errorf("receipt request_id %q, want %q", res.RequestID, run.req.ID)
	case res.ActionDigest != run.req.ActionDigest:
		return nil, fmt.Errorf("receipt action_digest %q, want %q", res.ActionDigest, run.req.ActionDigest)
	case res.DecisionID != d.ID:
		return nil, fmt.Errorf("receipt decision_id %q, want %q", res.DecisionID, d.ID)
	}
	return m, nil
}

// stored returns the stored resolution's event as wire bytes.
func (run *aaisRun) stored() ([]byte, error) {
	st, err := run.store.RequestState(run.ctx, run.req.ID)
	if err != nil {
		return nil, err
	}
	if st.Resolution == nil {
		return nil, errors.New("request still pending")
	}
	return aais.Marshal(st.Resolution.Event)
}

// aaisReparse requires m to marshal and parse back as a valid message.
func aaisReparse(m *aais.Message) error {
	b, err := aais.Marshal(m)
	if err != nil {
		return err
	}
	_, err = aais.Parse(b)
	return err
}

// aaisSet is one decision mutation: set the member at path (below
// "decision") to value, or to a different valid value when auto.
type aaisSet struct {
	path  []string
	value string
	auto  bool
}

// aaisPlan is a parsed mutation.
type aaisPlan struct {
	currentField string    // current_action.<field>
	sets         []aaisSet // decision.<field>=<value>, applied to the first decision
	resubmit     []aaisSet // a+b: applied to a second decision after a first approval
}

func aaisParseSet(s string, explicitOnly bool) (aaisSet, error) {
	rest, ok := strings.CutPrefix(s, "decision.")
	if !ok {
		return aaisSet{}, fmt.Errorf("unknown mutation %q (fail closed)", s)
	}
	field, value, hasValue := strings.Cut(rest, "=")
	if explicitOnly && !hasValue {
		return aaisSet{}, fmt.Errorf("unknown mutation %q (fail closed)", s)
	}
	path := strings.Split(field, ".")
	if slices.Contains(path, "") {
		return aaisSet{}, fmt.Errorf("unknown mutation %q (fail closed)", s)
	}
	return aaisSet{path: path, value: value, auto: !hasValue}, nil
}

func aaisParseMutation(m string) (aaisPlan, error) {
	var p aaisPlan
	switch {
	case m == "":
		return p, nil
	case strings.HasPrefix(m, "current_action."):
		f := strings.TrimPrefix(m, "current_action.")
		if f == "" || strings.ContainsAny(f, ".=+") {
			return p, fmt.Errorf("unknown mutation %q (fail closed)", m)
		}
		p.currentField = f
		return p, nil
	}
	// decision.<field>=<value>: a single explicit set, whose value may
	// itself contain "+" (a timestamp offset).
	if before, _, ok := strings.Cut(m, "="); ok && !strings.Contains(before, "+") {
		s, err := aaisParseSet(m, true)
		if err != nil {
			return p, err
		}
		p.sets = []aaisSet{s}
		return p, nil
	}
	parts := strings.Split(m, "+")
	if len(parts) < 2 {
		return p, fmt.Errorf("unknown mutation %q (fail closed)", m)
	}
	for _, part := range parts {
		s, err := aaisParseSet(part, false)
		if err != nil {
			return p, fmt.Errorf("unknown mutation %q (fail closed): %v", m, err)
		}
		p.resubmit = append(p.resubmit, s)
	}
	return p, nil
}

// aaisExpected classifies an expected outcome; unknown ones fail closed.
func aaisExpected(o string) error {
	switch o {
	case "same_resolution", string(aais.OutcomeConflict):
		return nil
	}
	if aais.Outcome(o).Valid() {
		return nil
	}
	return fmt.Errorf("unknown expected outcome %q (fail closed)", o)
}

func (e *aaisEnv) caseNow(c aaisCase) (time.Time, error) {
	s := c.Now
	if s == "" {
		s = aaisDefaultNow
	}
	ts, err := aais.ParseTimestamp(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("now %q: %w", s, err)
	}
	return ts.Time(), nil
}

// runCase runs one lifecycle case of cases.json.
func (e *aaisEnv) runCase(c aaisCase) (string, error) {
	if err := aaisExpected(c.Outcome); err != nil {
		return "", err
	}
	plan, err := aaisParseMutation(c.Mutation)
	if err != nil {
		return "", err
	}
	now, err := e.caseNow(c)
	if err != nil {
		return "", err
	}
	run, err := e.newRun(e.reqMsg.Request)
	if err != nil {
		return "", err
	}
	first := e.decMsg.Decision
	if len(plan.sets) > 0 {
		if first, err = e.mutateDecision(run.req, plan.sets); err != nil {
			return "", err
		}
	}
	var current []byte
	if plan.currentField != "" {
		if current, err = aaisChangedAction(run.req, plan.currentField); err != nil {
			return "", err
		}
	}
	run.clock.Set(now)
	r1, err := run.decide(first, current)
	if err != nil {
		return "", err
	}
	w1, err := aais.Marshal(r1)
	if err != nil {
		return "", err
	}

	switch {
	case c.Outcome == "same_resolution":
		// Replay the same decision at the same instant and, when the
		// request expires, after its expiry: both must be the first
		// receipt, byte for byte (same ids, same sequence).
		times := []time.Time{now}
		if !run.req.ExpiresAt.IsZero() {
			times = append(times, aaisLater(now, run.req.ExpiresAt.Time()).Add(time.Minute))
		}
		for _, t := range times {
			run.clock.Set(t)
			r2, err := run.decide(first, current)
			if err != nil {
				return "", err
			}
			w2, err := aais.Marshal(r2)
			if err != nil {
				return "", err
			}
			if !bytes.Equal(w1, w2) {
				return "", fmt.Errorf("replay at %s: receipt differs from the first\nfirst:  %s\nreplay: %s", t.Format(time.RFC3339), w1, w2)
			}
		}
		if err := run.unchanged(w1); err != nil {
			return "", err
		}
		return fmt.Sprintf("first outcome %s; replays deep-equal", r1.Resolution.Outcome), nil

	case len(plan.resubmit) > 0:
		if r1.Resolution.Outcome != aais.OutcomeApproved {
			return "", fmt.Errorf("first decision was %s, the mutation needs a first successful (approved) decision", r1.Resolution.Outcome)
		}
		second, err := e.resubmitDecision(run.req, first, plan.resubmit)
		if err != nil {
			return "", err
		}
		r2, err := run.decide(second, current)
		if err != nil {
			return "", err
		}
		got := r2.Resolution.Outcome
		if string(got) != c.Outcome {
			return "", fmt.Errorf("second decision (%s %s/%s): outcome %s, want %s", second.ID, second.Decision, second.Scope, got, c.Outcome)
		}
		if err := run.unchanged(w1); err != nil {
			return "", err
		}
		return fmt.Sprintf("second decision %s/%s got %s; stored resolution unchanged", second.Decision, second.Scope, got), nil
	}

	got := r1.Resolution.Outcome
	if c.Outcome == "same_resolution" || c.Outcome == string(aais.OutcomeConflict) || string(got) != c.Outcome {
		return "", fmt.Errorf("outcome %s, want %s", got, c.Outcome)
	}
	if got == aais.OutcomeApproved && r1.Resolution.EffectiveScope != first.Scope {
		return "", fmt.Errorf("effective_scope %q, want %q", r1.Resolution.EffectiveScope, first.Scope)
	}
	w, err := run.stored()
	if err != nil {
		return "", err
	}
	if !bytes.Equal(w, w1) {
		return "", errors.New("stored resolution differs from the returned receipt")
	}
	note := "outcome " + string(got)
	if got == aais.OutcomeApproved {
		note += ", effective_scope " + string(r1.Resolution.EffectiveScope)
	}
	return note, nil
}

func aaisLater(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// unchanged requires the stored resolution to still be want.
func (run *aaisRun) unchanged(want []byte) error {
	w, err := run.stored()
	if err != nil {
		return err
	}
	if !bytes.Equal(w, want) {
		return fmt.Errorf("stored resolution changed:\nwas: %s\nnow: %s", want, w)
	}
	return nil
}

// mutateDecision applies explicit sets to the decision fixture and parses
// the result, which must be a valid decision that differs from the fixture.
func (e *aaisEnv) mutateDecision(req *aais.Request, sets []aaisSet) (*aais.Decision, error) {
	doc, err := aaisDecodeObject(e.decRaw)
	if err != nil {
		return nil, err
	}
	d, _ := doc["decision"].(map[string]any)
	for _, s := range sets {
		if err := aaisSetString(d, s.path, s.value); err != nil {
			return nil, err
		}
	}
	return e.parseDecision(doc)
}

func (e *aaisEnv) parseDecision(doc map[string]any) (*aais.Decision, error) {
	b, err := jcs.CanonicalizeValue(doc)
	if err != nil {
		return nil, err
	}
	m, err := aais.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("mutated decision rejected: %w", err)
	}
	if m.Decision == nil {
		return nil, errors.New("mutated document is not a decision")
	}
	return m.Decision, nil
}

// aaisSetString sets the existing string member at path in d to v; a
// missing member, a non-string one or no change fails closed.
func aaisSetString(d map[string]any, path []string, v string) error {
	if d == nil {
		return errors.New("decision fixture has no decision object")
	}
	obj := d
	for _, seg := range path[:len(path)-1] {
		next, ok := obj[seg].(map[string]any)
		if !ok {
			return fmt.Errorf("decision.%s: no such object (fail closed)", strings.Join(path, "."))
		}
		obj = next
	}
	last := path[len(path)-1]
	old, ok := obj[last].(string)
	if !ok {
		return fmt.Errorf("decision.%s: no such string member (fail closed)", strings.Join(path, "."))
	}
	if old == v {
		return fmt.Errorf("decision.%s is already %q: the mutation changes nothing", strings.Join(path, "."), v)
	}
	obj[last] = v
	return nil
}

// resubmitDecision builds the second decision of an a+b mutation: every
// named field changed to a different valid value. decision and scope
// change together to a pair the request offers.
func (e *aaisEnv) resubmitDecision(req *aais.Request, first *aais.Decision, sets []aaisSet) (*aais.Decision, error) {
	b, err := aais.NewMessage(aais.Header{ID: "evt_resubmit", OccurredAt: first.DecidedAt.Time()}, first)
	if err != nil {
		return nil, err
	}
	raw, err := aais.Marshal(b)
	if err != nil {
		return nil, err
	}
	doc, err := aaisDecodeObject(raw)
	if err != nil {
		return nil, err
	}
	d, ok := doc["decision"].(map[string]any)
	if !ok {
		return nil, errors.New("decision did not marshal as an object")
	}
	changeVerdict, changeScope := false, false
	for _, s := range sets {
		if !s.auto {
			if err := aaisSetString(d, s.path, s.value); err != nil {
				return nil, err
			}
			continue
		}
		field := strings.Join(s.path, ".")
		var v string
		switch field {
		case "decision":
			changeVerdict = true
			continue
		case "scope":
			changeScope = true
			continue
		case "id":
			v = first.ID + "_other"
		case "actor.id":
			v = first.Actor.ID + "_other"
		case "decided_at":
			v = first.DecidedAt.Time().Add(time.Minute).UTC().Format(time.RFC3339)
		case "action_digest":
			v = "sha256:" + strings.Repeat("0", 64)
		default:
			return nil, fmt.Errorf("decision.%s: no rule for a different valid value (fail closed)", field)
		}
		if err := aaisSetString(d, s.path, v); err != nil {
			return nil, err
		}
	}
	if changeVerdict || changeScope {
		i := slices.IndexFunc(req.Choices, func(c aais.Choice) bool {
			return (c.Decision != first.Decision) == changeVerdict && (c.Scope != first.Scope) == changeScope
		})
		if i < 0 {
			return nil, errors.New("the request offers no choice that changes the named fields")
		}
		d["decision"], d["scope"] = string(req.Choices[i].Decision), string(req.Choices[i].Scope)
	}
	return e.parseDecision(doc)
}

// aaisChangedAction returns req's action with field changed to a
// different valid value.
func aaisChangedAction(req *aais.Request, field string) ([]byte, error) {
	v, err := jcs.Decode(req.Action.Raw())
	if err != nil {
		return nil, err
	}
	a, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("request action is not an object")
	}
	old, present := a[field]
	var candidates []any
	switch o := old.(type) {
	case string:
		candidates = []any{o + " (changed)", o + "_changed"}
	case []any:
		candidates = []any{append(slices.Clone(o), "Changed by the conformance runner")}
	case map[string]any:
		m := make(map[string]any, len(o)+1)
		for k, x := range o {
			m[k] = x
		}
		m["conformance_changed"] = true
		candidates = []any{m}
	case bool:
		candidates = []any{!o}
	default:
		if !present {
			candidates = []any{"changed"}
		}
	}
	for _, c := range candidates {
		a[field] = c
		b, err := jcs.CanonicalizeValue(a)
		if err != nil {
			continue
		}
		act, err := aais.NewAction(json.RawMessage(b))
		if err != nil {
			continue
		}
		if d, err := act.Digest(); err != nil || d == req.ActionDigest {
			continue
		}
		return b, nil
	}
	return nil, fmt.Errorf("current_action.%s: no different valid value (fail closed)", field)
}

func aaisDecodeObject(data []byte) (map[string]any, error) {
	v, err := jcs.Decode(data)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}

// aaisRejected parses a mutated fixture document and requires a
// validation error, of class want when want is not nil.
func aaisRejected(doc map[string]any, want error) (string, error) {
	b, err := jcs.CanonicalizeValue(doc)
	if err != nil {
		return "", err
	}
	_, err = aais.Parse(b)
	if err == nil {
		return "", errors.New("mutated document accepted")
	}
	var ve *aais.ValidationError
	if !errors.As(err, &ve) {
		return "", fmt.Errorf("rejected without a validation error: %v", err)
	}
	if want != nil && !errors.Is(err, want) {
		return "", fmt.Errorf("rejected, but not as %v: %v", want, err)
	}
	rules := make([]string, 0, len(ve.Issues))
	for _, is := range ve.Issues {
		rules = append(rules, is.Rule)
	}
	slices.Sort(rules)
	return "rejected (" + strings.Join(slices.Compact(rules), ", ") + ")", nil
}

// requestDoc returns the request fixture decoded, and its request object.
func (e *aaisEnv) requestDoc() (map[string]any, map[string]any, error) {
	doc, err := aaisDecodeObject(e.reqRaw)
	if err != nil {
		return nil, nil, err
	}
	r, ok := doc["request"].(map[string]any)
	if !ok {
		return nil, nil, errors.New("request fixture has no request object")
	}
	return doc, r, nil
}

func (e *aaisEnv) decisionDoc() (map[string]any, map[string]any, error) {
	doc, err := aaisDecodeObject(e.decRaw)
	if err != nil {
		return nil, nil, err
	}
	d, ok := doc["decision"].(map[string]any)
	if !ok {
		return nil, nil, errors.New("decision fixture has no decision object")
	}
	return doc, d, nil
}

// refusedByAuthority requires Create to refuse req and record nothing.
func (e *aaisEnv) refusedByAuthority(req *aais.Request) error {
	s := memstore.New()
	a, err := aais.NewAuthority(s, &aais.AuthorityOptions{Now: req.CreatedAt.Time})
	if err != nil {
		return err
	}
	if _, _, err := a.Create(context.Background(), req); err == nil {
		return errors.New("Authority.Create accepted the mutated request")
	}
	if _, err := s.RequestState(context.Background(), req.ID); !errors.Is(err, aais.ErrUnknownRequest) {
		return fmt.Errorf("refused request was recorded: %v", err)
	}
	return nil
}

func (e *aaisEnv) checkWrongDigest() (string, error) {
	doc, r, err := e.requestDoc()
	if err != nil {
		return "", err
	}
	r["action_digest"] = "sha256:" + strings.Repeat("0", 64)
	note, err := aaisRejected(doc, aais.ErrDigestMismatch)
	if err != nil {
		return "", err
	}
	req := *e.reqMsg.Request
	req.ActionDigest = "sha256:" + strings.Repeat("0", 64)
	return note + "; Authority.Create refuses it", e.refusedByAuthority(&req)
}

func (e *aaisEnv) checkMissingExit() (string, error) {
	doc, r, err := e.requestDoc()
	if err != nil {
		return "", err
	}
	choices, _ := r["choices"].([]any)
	if len(choices) == 0 || e.reqMsg.Request.Choices[0].Decision.Exits() {
		return "", errors.New("choices[0] is not an approval: the mutation would keep an exit choice")
	}
	r["choices"] = choices[:1]
	note, err := aaisRejected(doc, nil)
	if err != nil {
		return "", err
	}
	req := *e.reqMsg.Request
	req.Choices = req.Choices[:1]
	return note + "; Authority.Create refuses it", e.refusedByAuthority(&req)
}

func (e *aaisEnv) checkDuplicateTuple() (string, error) {
	doc, r, err := e.requestDoc()
	if err != nil {
		return "", err
	}
	choices, _ := r["choices"].([]any)
	if len(choices) == 0 {
		return "", errors.New("request has no choices")
	}
	r["choices"] = append(slices.Clone(choices), choices[0])
	note, err := aaisRejected(doc, nil)
	if err != nil {
		return "", err
	}
	req := *e.reqMsg.Request
	req.Choices = append(slices.Clone(req.Choices), req.Choices[0])
	return note + "; Authority.Create refuses it", e.refusedByAuthority(&req)
}

func (e *aaisEnv) checkEditedAction() (string, error) {
	doc, d, err := e.decisionDoc()
	if err != nil {
		return "", err
	}
	d["replacement_arguments"] = map[string]any{"command": "node --check other.js"}
	return aaisRejected(doc, aais.ErrSchema)
}

func (e *aaisEnv) checkDenySession() (string, error) {
	doc, d, err := e.decisionDoc()
	if err != nil {
		return "", err
	}
	d["decision"], d["scope"] = string(aais.Deny), string(aais.ScopeSession)
	note, err := aaisRejected(doc, aais.ErrSchema)
	if err != nil {
		return "", err
	}
	// The authority must refuse the same decision built as a struct and
	// leave the request pending.
	run, err := e.newRun(e.reqMsg.Request)
	if err != nil {
		return "", err
	}
	bad := *e.decMsg.Decision
	bad.Decision, bad.Scope = aais.Deny, aais.ScopeSession
	run.clock.Set(bad.DecidedAt.Time())
	if _, err := run.auth.Decide(run.ctx, &bad, bad.Actor, nil); err == nil {
		return "", errors.New("Authority.Decide accepted deny/session")
	}
	st, err := run.store.RequestState(run.ctx, run.req.ID)
	if err != nil {
		return "", err
	}
	if !st.Pending() {
		return "", errors.New("a refused decision resolved the request")
	}
	return note + "; Authority.Decide refuses it, request stays pending", nil
}

func (e *aaisEnv) checkKeyOrder() (string, error) {
	a, err := aais.ActionDigest([]byte(`{"b":2,"a":1}`))
	if err != nil {
		return "", err
	}
	b, err := aais.ActionDigest([]byte(`{"a":1,"b":2}`))
	if err != nil {
		return "", err
	}
	if a != b {
		return "", fmt.Errorf(`{"b":2,"a":1} digests to %s, {"a":1,"b":2} to %s`, a, b)
	}
	// The fixture action with its members written in reverse order must
	// still reproduce the vector.
	var members map[string]json.RawMessage
	if err := json.Unmarshal(e.reqMsg.Request.Action.Raw(), &members); err != nil {
		return "", err
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Reverse(keys)
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(members[k])
	}
	buf.WriteByte('}')
	c, err := aais.ActionDigest(buf.Bytes())
	if err != nil {
		return "", err
	}
	if c != e.corpus.ActionDigest {
		return "", fmt.Errorf("fixture action with reversed member order digests to %s, want %s", c, e.corpus.ActionDigest)
	}
	return "equal digests; reversed fixture action reproduces the vector", nil
}

// snapshot takes a snapshot at t and requires it to re-parse; the parsed
// copy is what a reconnecting presenter restores from.
func (run *aaisRun) snapshot(t time.Time) (*aais.Snapshot, error) {
	run.clock.Set(t)
	m, err := run.auth.Snapshot(run.ctx)
	if err != nil {
		return nil, err
	}
	b, err := aais.Marshal(m)
	if err != nil {
		return nil, err
	}
	restored, err := aais.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("snapshot does not validate: %w", err)
	}
	if restored.Snapshot == nil {
		return nil, errors.New("snapshot message carries no snapshot")
	}
	return restored.Snapshot, nil
}

func (e *aaisEnv) checkSnapshotRestore() (string, error) {
	run, err := e.newRun(e.reqMsg.Request)
	if err != nil {
		return "", err
	}
	now, _ := aais.ParseTimestamp(aaisDefaultNow)
	s, err := run.snapshot(now.Time())
	if err != nil {
		return "", err
	}
	if len(s.Pending) != 1 || s.Pending[0].ID != e.reqMsg.Request.ID {
		ids := make([]string, 0, len(s.Pending))
		for _, p := range s.Pending {
			ids = append(ids, p.ID)
		}
		return "", fmt.Errorf("pending %v, want [%s]", ids, e.reqMsg.Request.ID)
	}
	// as_of_sequence: the authority re-envelopes the request on its own
	// gap-free stream, so the fixture's sequence 41 (another producer's
	// numbering) cannot appear; the snapshot must be as of the request's
	// event on this stream.
	if s.AsOfSequence != run.created.Sequence {
		return "", fmt.Errorf("as_of_sequence %d, want %d (the approval.requested event)", s.AsOfSequence, run.created.Sequence)
	}
	// Restore: the pending request a presenter rebuilds is the fixture
	// request, member for member.
	got, err := s.Pending[0].MarshalJSON()
	if err != nil {
		return "", err
	}
	want, err := e.reqMsg.Request.MarshalJSON()
	if err != nil {
		return "", err
	}
	if cg, cw := aaisCanon(got), aaisCanon(want); cg == "" || cg != cw {
		return "", fmt.Errorf("restored pending request differs from the fixture request")
	}
	return fmt.Sprintf("1 pending (%s), as_of_sequence %d (authority stream; fixture sequence %d is the producer's)",
		s.Pending[0].ID, s.AsOfSequence, e.reqMsg.Sequence), nil
}

func aaisCanon(b []byte) string {
	c, err := jcs.Canonicalize(b)
	if err != nil {
		return ""
	}
	return string(c)
}

func (e *aaisEnv) checkSnapshotExpiry() (string, error) {
	exp := e.reqMsg.Request.ExpiresAt
	if exp.IsZero() {
		return "", errors.New("request fixture has no expires_at")
	}
	run, err := e.newRun(e.reqMsg.Request)
	if err != nil {
		return "", err
	}
	for _, t := range []time.Time{exp.Time(), exp.Time().Add(time.Hour)} {
		s, err := run.snapshot(t)
		if err != nil {
			return "", err
		}
		if len(s.Pending) != 0 {
			return "", fmt.Errorf("snapshot at %s has %d pending, want 0", t.Format(time.RFC3339), len(s.Pending))
		}
	}
	return "0 pending at and after " + exp.String(), nil
}

func (e *aaisEnv) checkExtensions() (string, error) {
	const name = "com.example/x"
	ext := map[string]any{name: map[string]any{"note": "conformance passthrough", "n": json.Number("1")}}
	wantExt := `{"n":1,"note":"conformance passthrough"}`

	doc, r, err := e.requestDoc()
	if err != nil {
		return "", err
	}
	doc["extensions"], r["extensions"] = ext, ext
	b, err := jcs.CanonicalizeValue(doc)
	if err != nil {
		return "", err
	}
	reqMsg, err := aais.Parse(b)
	if err != nil {
		return "", fmt.Errorf("request with extensions rejected: %w", err)
	}
	ddoc, d, err := e.decisionDoc()
	if err != nil {
		return "", err
	}
	ddoc["extensions"], d["extensions"] = ext, ext
	db, err := jcs.CanonicalizeValue(ddoc)
	if err != nil {
		return "", err
	}
	decMsg, err := aais.Parse(db)
	if err != nil {
		return "", fmt.Errorf("decision with extensions rejected: %w", err)
	}
	for where, x := range map[string]aais.Extensions{
		"request envelope": reqMsg.Extensions, "request": reqMsg.Request.Extensions,
		"decision envelope": decMsg.Extensions, "decision": decMsg.Decision.Extensions,
	} {
		if aaisCanon(x[name]) != wantExt {
			return "", fmt.Errorf("%s extension not preserved: %s", where, x[name])
		}
	}
	// Round trip through Marshal keeps them.
	out, err := aais.Marshal(reqMsg)
	if err != nil {
		return "", err
	}
	if aaisCanon(out) != aaisCanon(b) {
		return "", errors.New("request with extensions does not round-trip")
	}

	// No effect on the outcome, and the authority keeps the request's
	// extensions.
	run, err := e.newRun(reqMsg.Request)
	if err != nil {
		return "", err
	}
	if aaisCanon(run.created.Request.Extensions[name]) != wantExt {
		return "", errors.New("authority dropped the request extension")
	}
	now, _ := aais.ParseTimestamp(aaisDefaultNow)
	run.clock.Set(now.Time())
	rec, err := run.decide(decMsg.Decision, nil)
	if err != nil {
		return "", err
	}
	if rec.Resolution.Outcome != aais.OutcomeApproved || rec.Resolution.EffectiveScope != decMsg.Decision.Scope {
		return "", fmt.Errorf("outcome %s/%s, want approved/%s as without extensions",
			rec.Resolution.Outcome, rec.Resolution.EffectiveScope, decMsg.Decision.Scope)
	}
	st, err := run.store.RequestState(run.ctx, run.req.ID)
	if err != nil {
		return "", err
	}
	if aaisCanon(st.Request.Event.Request.Extensions[name]) != wantExt {
		return "", errors.New("stored request lost its extension")
	}
	return "accepted on envelope, request and decision; preserved; outcome approved", nil
}
