package onboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/onboarding"
	"github.com/custos-runtime/custos/arsia/schema"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/asc"
)

// Result is the answer to one onboarding request: the signed decision
// message for an authenticated agent (Decision, with Outcome), or a
// refusal before it was authenticated (Status and Problem).
type Result struct {
	Status int
	// Decision is the signed decision message (JSON).
	Decision []byte
	Outcome  *Outcome
	// Problem is the unsigned refusal: an RFC 9457 document with the ASC
	// status, and the onboarding members (denial_reason, failed_step,
	// steps_completed) when a phase 1 step failed.
	Problem    []byte
	RetryAfter time.Duration
}

// Onboard runs the six phases for one request body, which came with the
// DPoP proof dpop ("" for none): the token of an approval is then bound
// to its key.
func (s *Service) Onboard(ctx context.Context, body []byte, dpop string) Result {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		return s.refused(&refusal{status: http.StatusServiceUnavailable, code: arsia.CodeServiceUnavailable,
			desc: "Too many onboardings are running; retry later."}, time.Second)
	}
	now := s.o.Now()
	r, err := s.ParseRequest(body, now)
	if err != nil {
		return s.refusedErr(err)
	}
	r.DPoP = dpop
	if s.o.Configured(r.From) {
		return s.refused(&refusal{status: http.StatusConflict, code: arsia.CodeConflict,
			desc: "This agent is configured on the gateway; it is not onboarded over the configuration."}, 0)
	}
	var phases onboarding.PhaseTracker
	if err := phases.Enter(onboarding.PhaseDiscoveryAndIdentity); err != nil {
		return s.refusedErr(err)
	}
	var steps onboarding.StepTracker
	f, err := s.phase1(ctx, r, &steps)
	if err != nil {
		return s.refusedErr(err)
	}
	// The proof is checked (its jti remembered) only now that the request
	// is the agent's.
	jkt := ""
	if r.DPoP != "" {
		if s.o.DPoP == nil {
			return s.refused(&refusal{status: http.StatusBadRequest, code: arsia.CodeInvalidRequest,
				desc: "This gateway does not bind onboarding tokens to DPoP keys; send the request without a DPoP header."}, 0)
		}
		if jkt, err = s.o.DPoP(ctx, r.DPoP, now); err != nil {
			s.log.InfoContext(ctx, "onboarding: DPoP proof refused", "agent", r.From, "err", err)
			return s.refused(&refusal{status: http.StatusBadRequest, code: arsia.CodeInvalidRequest,
				desc: "The DPoP proof was not accepted (htm POST, htu the onboarding URL, fresh iat, a new jti, no ath)."}, 0)
		}
	}
	if s.o.Seen != nil {
		until := now.Add(10 * time.Minute)
		if exp, ok := r.Env["expires_at"].(string); ok {
			if t, err := arsia.ParseTimestamp(exp); err == nil {
				until = t
			}
		}
		seen, err := s.o.Seen(ctx, "onboarding:"+r.From+"/"+r.ID, until)
		if err != nil {
			return s.internal(ctx, fmt.Errorf("remembering the request: %w", err))
		}
		if seen {
			return s.refused(&refusal{status: http.StatusConflict, code: arsia.CodeConflict,
				desc: "This onboarding request was received before; send a new one."}, 0)
		}
	}
	// From here the request is the agent's: every outcome is a signed,
	// audited decision.
	out := &Outcome{Agent: r.From, MessageID: r.ID, Classification: f.record.AISystemClassification}
	deny := func(reason string) Result {
		out.Steps, out.Phases = steps.Completed(), phases.Completed()
		p, err := onboarding.BuildDecisionPayload(onboarding.DecisionInput{AgentID: r.From, Policy: s.o.Policy, DenialReasons: []string{reason}})
		if err != nil {
			return s.internal(ctx, err)
		}
		return s.decide(ctx, r, out, p, nil)
	}
	if c := compliance.Classification(f.record.AISystemClassification); !c.Valid() || c == compliance.UnacceptableRisk {
		// Step 6: an unacceptable-risk agent is never onboarded (and an
		// unknown class is treated as one: fail closed).
		return deny(onboarding.ReasonUnacceptableRisk)
	}
	if !steps.Done() {
		return s.internal(ctx, errors.New("phase 1 ended before its last step"))
	}
	// 2. compliance conformance
	if err := phases.Enter(onboarding.PhaseComplianceConformance); err != nil {
		return s.internal(ctx, err)
	}
	conf := s.conformance(ctx, r, f)
	out.Conformance = &conf
	// CHECK-04 noted the earliest audit record, which phase 4 uses.
	if !conf.Passed() {
		return deny(onboarding.ReasonConformanceFailed)
	}
	// 3. capability scoping
	if err := phases.Enter(onboarding.PhaseCapabilityScoping); err != nil {
		return s.internal(ctx, err)
	}
	var risk map[string]int
	if s.o.RiskLevels != nil {
		risk = s.o.RiskLevels()
	}
	p, err := onboarding.BuildDecisionPayload(onboarding.DecisionInput{AgentID: r.From, Policy: s.o.Policy, Requested: r.Requested, ActionRiskLevels: risk})
	if err != nil {
		return s.internal(ctx, err)
	}
	if !p.Approved() {
		out.Steps, out.Phases = steps.Completed(), phases.Completed()
		return s.decide(ctx, r, out, p, nil)
	}
	// 4. provenance (informational: it never denies)
	if err := phases.Enter(onboarding.PhaseProvenance); err != nil {
		return s.internal(ctx, err)
	}
	prov := onboarding.ProvenanceFromRecord(f.record, f.earliestAudit, now)
	out.Provenance = &prov
	if !prov.Verified {
		s.log.WarnContext(ctx, "onboarding: provenance not verified", "agent", r.From, "notes", prov.Notes)
	}
	// 5. decision
	if err := phases.Enter(onboarding.PhaseDecision); err != nil {
		return s.internal(ctx, err)
	}
	out.Steps, out.Phases = steps.Completed(), phases.Completed()
	agent := Agent{ID: r.From, URL: r.BaseURL, FreelyAllowed: p.FreelyAllowed, OversightRequired: p.OversightRequired, jkt: jkt,
		PolicyVersion: p.PolicyVersion, Classification: f.record.AISystemClassification,
		OnboardedAt: now.UTC().Format(onboarding.TimeLayout), RequestID: r.ID}
	return s.decide(ctx, r, out, p, &agent)
}

// decide builds, audits and (on approval) activates the decision p, and
// signs its message. agent is nil for a denial.
func (s *Service) decide(ctx context.Context, r *Request, out *Outcome, p *onboarding.Payload, agent *Agent) Result {
	out.Decision = p
	lifetime := time.Duration(p.TokenLifetimeSeconds) * time.Second
	// The decision is recorded before anything is granted (a record that
	// cannot be written grants nothing), without the token, which is
	// issued, and audited, separately.
	var placeholder *onboarding.Issued
	if agent != nil {
		placeholder = &onboarding.Issued{Token: "-", ExpiresAt: s.o.Now().Add(lifetime)}
		out.Phases = append(out.Phases, onboarding.PhaseOperational)
	}
	recorded, err := p.Result(placeholder, out.Conformance, out.Provenance)
	if err != nil {
		return s.internal(ctx, err)
	}
	delete(recorded, "token")
	delete(recorded, "token_expires_at")
	out.Result = recorded
	wctx := context.WithoutCancel(ctx)
	if err := s.o.Record(wctx, *out); err != nil {
		return s.internal(ctx, fmt.Errorf("auditing the decision on %s: %w", r.From, err))
	}
	// withdraw undoes an approval that could not be completed, and records
	// that it was withdrawn.
	withdraw := func(cause error) Result {
		if agent != nil {
			if err := s.o.Deactivate(wctx, agent.ID); err != nil {
				cause = errors.Join(cause, err)
			}
			w := *out
			w.Withdrawn = cause.Error()
			if err := s.o.Record(wctx, w); err != nil {
				cause = errors.Join(cause, fmt.Errorf("auditing the withdrawal: %w", err))
			}
		}
		return s.internal(ctx, fmt.Errorf("onboarding %s: %w", r.From, cause))
	}
	var tok *onboarding.Issued
	if agent != nil {
		// 6. operational: the agent is a sender from now on, and its token
		// covers exactly what it was granted.
		if err := s.o.Activate(wctx, *agent); err != nil {
			return withdraw(fmt.Errorf("activating: %w", err))
		}
		t, err := s.o.Issue(wctx, agent.ID, p.Effective(), agent.jkt, lifetime)
		if err != nil {
			return withdraw(fmt.Errorf("issuing the token: %w", err))
		}
		tok = &onboarding.Issued{Token: t.Value, ExpiresAt: t.ExpiresAt}
	}
	result, err := p.Result(tok, out.Conformance, out.Provenance)
	if err != nil {
		return withdraw(err)
	}
	env, err := onboarding.NewDecisionMessage(s.o.Agent, r.From, r.ID, result, map[string]any{"profile": s.o.Profile}, s.o.Now())
	if err != nil {
		return withdraw(err)
	}
	m, err := env.Map()
	if err == nil {
		m, err = sig.Sign(m, s.o.Signer, s.o.KID)
	}
	var b []byte
	if err == nil {
		b, err = json.Marshal(m)
	}
	if err != nil {
		return withdraw(err)
	}
	return Result{Status: http.StatusOK, Decision: b, Outcome: out}
}

// conformance runs the five Phase 2 checks (ARSIA-Identity §7.3):
//
//   - CHECK-01 envelope validity: the request is valid under strict
//     validation (an unknown compliance profile fails), and its sender,
//     signing kid and identity record name the same agent;
//   - CHECK-02 signature verification: the request verified with a key
//     of the JWKS the agent publishes (it did, or phase 1 refused it);
//   - CHECK-03 human oversight: skipped — the gateway holds every call of
//     an oversight_required capability for a human itself, so the agent's
//     own pending_approval behaviour is not relied on;
//   - CHECK-04 audit trail: the agent's /.well-known/arsia/audit, when it
//     answers, is a list of ARSIA audit records with payload hashes and no
//     payloads; skipped when it does not answer;
//   - CHECK-05 classification consistency: the classification the request
//     declares is not above the identity record's, and a high-risk agent
//     declares a known compliance profile; skipped for an agent that is
//     not high-risk and declares none.
func (s *Service) conformance(ctx context.Context, r *Request, f *found) onboarding.ConformanceResult {
	var res onboarding.ConformanceResult
	run := func(id string, check func() (string, string)) {
		start := time.Now()
		status, details := check()
		res.Checks = append(res.Checks, onboarding.ConformanceCheck{TestID: id, Status: status, Details: details, Duration: time.Since(start)})
	}
	run("CHECK-01", func() (string, string) {
		if issues := arsia.ErrorIssues(arsia.Validate(r.Env, arsia.ValidateOptions{Strict: true, Profiles: s.o.Profiles})); len(issues) > 0 {
			return onboarding.CheckFail, "the request is invalid under strict validation: " + issues[0].Message
		}
		if !strings.HasPrefix(f.verified.KeyID, f.record.AgentID+"#") || f.verified.From != f.record.AgentID {
			return onboarding.CheckFail, "the sender, its kid and its identity record do not name the same agent"
		}
		return onboarding.CheckPass, ""
	})
	run("CHECK-02", func() (string, string) {
		return onboarding.CheckPass, "verified with " + f.verified.KeyID + " (" + f.verified.Algorithm + ")"
	})
	run("CHECK-03", func() (string, string) {
		return onboarding.CheckSkip, "the gateway holds each call of an oversight_required capability for a human approval itself"
	})
	run("CHECK-04", func() (string, string) { return s.checkAudit(ctx, r, f) })
	run("CHECK-05", func() (string, string) {
		class := f.record.AISystemClassification
		if class != string(compliance.HighRisk) && r.Declared == "" {
			return onboarding.CheckSkip, "Agent is not high-risk"
		}
		if r.Declared != "" {
			if err := onboarding.CheckRecordClassification(f.record, r.Declared); err != nil {
				return onboarding.CheckFail, err.Error()
			}
		}
		if err := onboarding.CheckProfileRequirement(s.o.Profiles, class, r.Profile, string(arsia.IntentRequest)); err != nil {
			return onboarding.CheckFail, err.Error()
		}
		return onboarding.CheckPass, ""
	})
	return res
}

// maxAuditBytes caps the agent's audit document.
const maxAuditBytes = 4 << 20

// checkAudit is CHECK-04; it also notes the earliest processed_at, the
// provenance of Phase 4.
func (s *Service) checkAudit(ctx context.Context, r *Request, f *found) (string, string) {
	body, _, err := s.get(ctx, strings.TrimSuffix(r.BaseURL, "/")+"/.well-known/arsia/audit", maxAuditBytes)
	if err != nil {
		var se *statusError
		if errors.As(err, &se) && se.status >= 500 {
			return onboarding.CheckSkip, fmt.Sprintf("Audit endpoint not available (status %d)", se.status)
		}
		return onboarding.CheckSkip, "Audit endpoint not available"
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return onboarding.CheckFail, "the audit endpoint's answer is not JSON"
	}
	records, ok := doc.([]any)
	if m, isObj := doc.(map[string]any); isObj {
		records, ok = m["records"].([]any)
	}
	if !ok {
		return onboarding.CheckFail, "the audit endpoint's answer is not a list of audit records"
	}
	var earliest time.Time
	for i, rec := range records {
		m, _ := rec.(map[string]any)
		if m == nil {
			return onboarding.CheckFail, fmt.Sprintf("audit record %d is not an object", i)
		}
		if _, raw := m["payload"]; raw {
			return onboarding.CheckFail, fmt.Sprintf("audit record %d holds the payload instead of its hash", i)
		}
		if errs, err := schema.Validate(m, "arsia-audit-record.schema.json"); err != nil || len(errs) > 0 {
			return onboarding.CheckFail, fmt.Sprintf("audit record %d is not an ARSIA audit record", i)
		}
		at, _ := m["processed_at"].(string)
		if t, err := arsia.ParseTimestamp(at); err == nil && (earliest.IsZero() || t.Before(earliest)) {
			earliest = t
		}
	}
	if !earliest.IsZero() {
		f.earliestAudit = earliest.UTC().Format(onboarding.TimeLayout)
	}
	return onboarding.CheckPass, fmt.Sprintf("%d audit records", len(records))
}

// refusedErr answers err: a refusal as it says, anything else as an
// internal failure.
func (s *Service) refusedErr(err error) Result {
	var r *refusal
	if errors.As(err, &r) {
		return s.refused(r, 0)
	}
	return s.internal(context.Background(), err)
}

func (s *Service) refused(r *refusal, retry time.Duration) Result {
	code := arsia.ToASC(r.code)
	extra := map[string]any{"arsia_error": r.code}
	if r.denial != "" {
		extra["denial_reason"], extra["failed_step"] = r.denial, string(r.step)
	}
	if r.completed != nil {
		done := make([]string, len(r.completed))
		for i, st := range r.completed {
			done[i] = string(st)
		}
		extra["steps_completed"] = done
	}
	return Result{Status: r.status, Problem: problem(code, r.status, r.desc, extra), RetryAfter: retry}
}

func (s *Service) internal(ctx context.Context, err error) Result {
	s.log.ErrorContext(ctx, "onboarding failed", "err", err)
	return Result{Status: http.StatusServiceUnavailable, RetryAfter: 5 * time.Second,
		Problem: problem(asc.DependencyUnavailable, http.StatusServiceUnavailable, "The onboarding could not be completed; nothing was granted. Retry later.", nil)}
}

func problem(code asc.Code, status int, detail string, extra map[string]any) []byte {
	env := asc.New(code, asc.ScopePolicyDecision, status < 500 && status != http.StatusTooManyRequests, time.Now())
	env.Message = &asc.Message{User: detail}
	p := asc.ToProblem(env)
	p.Status, p.Extra = status, extra
	b, err := p.MarshalJSON()
	if err != nil {
		b, _ = json.Marshal(map[string]any{"status": status, "detail": detail})
	}
	return b
}

// ServeHTTP answers POST Path: the body is the agent's signed onboarding
// request; the answer is the signed decision (200, application/arsia+json)
// or an unsigned problem.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.o.MaxBody))
	proofs := r.Header.Values("DPoP")
	var res Result
	switch {
	case err != nil:
		res = s.refused(&refusal{status: http.StatusRequestEntityTooLarge, code: arsia.CodeInvalidRequest,
			desc: "The request body is too large or could not be read."}, 0)
	case len(proofs) > 1:
		res = s.refused(&refusal{status: http.StatusBadRequest, code: arsia.CodeInvalidRequest, desc: "More than one DPoP header."}, 0)
	default:
		res = s.Onboard(r.Context(), body, strings.Join(proofs, ""))
	}
	w.Header().Set("Cache-Control", "no-store")
	if res.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int(res.RetryAfter.Seconds())))
	}
	if res.Decision != nil {
		w.Header().Set("Content-Type", "application/arsia+json; v=1")
		w.WriteHeader(res.Status)
		_, _ = w.Write(res.Decision)
		return
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(res.Status)
	_, _ = w.Write(res.Problem)
}
