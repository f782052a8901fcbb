// Package crashtest drives `custos serve` through approval cycles while
// killing it with SIGKILL, and checks afterwards what the gateway promises
// (docs/reliability.md): nothing acknowledged is lost, an approved action
// runs exactly once or is answered RESULT_STATE_UNKNOWN, nothing runs
// without an approval, and the audit chain verifies.
//
// The gateway runs as a child process of the driver (the real binary, so a
// kill is a real crash: no deferred function, no flush); its side effects
// are lines an exec handler appends to a file. The driver is shared by the
// package's test and by `custos bench crash`.
package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/asc"
)

// Options sizes and places a run. The zero value of each field but Binary
// and Dir means its default.
type Options struct {
	// Binary is the custos executable to run (required).
	Binary string
	// Dir is an empty directory for the run's files (required): the
	// configuration, the data directories, the side-effect log and the
	// children's logs, which stay there for inspection.
	Dir string
	// Cycles is the number of approval cycles (default 1000).
	Cycles int
	// Kills is the number of SIGKILLs spread over the run.
	Kills int
	// Concurrency is the number of cycles in flight (default 16).
	Concurrency int
	// Seed drives every random choice of the run; 0 draws one. Result.Seed
	// is the seed used: pass it again to replay the same plan.
	Seed uint64
	// Store, when set, is a postgres:// URL (with custos_schema naming a
	// schema no one else uses) shared by Replicas gateways; "" runs one
	// gateway on SQLite files in its data directory.
	Store string
	// Replicas is the number of gateways on Store (default 2; 1 without
	// Store). Kills hit one replica at a time.
	Replicas int
	// Timeout bounds the whole run (default 30 minutes).
	Timeout time.Duration
	// Progress, when set, receives a line per kill and phase.
	Progress io.Writer
}

// Result is what a run saw. Counts are of cycles unless named otherwise.
type Result struct {
	Seed                             uint64
	Cycles, Kills, Replicas          int
	Store                            string // "sqlite" or "postgres"
	Elapsed                          time.Duration
	Acknowledged                     int // the gateway answered 202 pending_approval (first try or retry)
	Retried                          int // submissions sent more than once (same bytes) after no answer
	Approved, Denied                 int // receipts received for the cycle's decision
	Executed                         int // approved, answered 200, token in the log once
	Unknown6005                      int // approved, answered ASC 6005 RESULT_STATE_UNKNOWN
	Ended                            int // known to the gateway, not approved by the driver, ended with an error (expired, or ended by the gateway)
	Replays, ReplaysSame             int // identical decision replays sent / answered with the same receipt
	Contradictions, Conflicts        int // contradicting decisions sent / answered 409
	Effects                          int // lines in the side-effect log
	Lost, Stuck, Doubles, Unapproved int
	Misanswered                      int // approved, nothing ran, answered an error other than 6005; or denied and answered 200
	RetryRefused                     int // a retry with the same bytes was refused (409) instead of getting the first reply
	ApprovalMissing                  int // acknowledged, yet no approval request to decide appeared
	DecisionAnomalies                int // a decision, replay or contradiction answered otherwise than promised
	SubmitAnomalies                  int // a submission answered neither 202 nor a refused retry (or not at all)
	BadLines                         int // side-effect log lines that are no token of this run
	IncompleteInputs                 int // handler runs that got no whole request on stdin (the gateway died first) and did nothing
	AuditRecords                     string
	AuditOK                          bool
	AuditOutput                      string // what custos audit verify printed
	AuditRepeats                     int    // approval records verify reports as repeats of an earlier one (allowed: marked)
	// Problems describes the first few failures of each kind.
	Problems []string
}

// Failed reports whether the run found any violation.
func (r *Result) Failed() bool {
	return r.Lost+r.Stuck+r.Doubles+r.Unapproved+r.Misanswered+r.RetryRefused+r.ApprovalMissing+r.DecisionAnomalies+r.SubmitAnomalies+r.BadLines > 0 ||
		!r.AuditOK || r.ReplaysSame != r.Replays || r.Conflicts != r.Contradictions
}

// Summary is the one-line account of the run.
func (r *Result) Summary() string {
	verdict := "PASS"
	if r.Failed() {
		verdict = "FAIL"
	}
	return fmt.Sprintf("crash %s: store=%s replicas=%d seed=%d cycles=%d kills=%d acknowledged=%d retried=%d executed=%d denied=%d 6005=%d ended=%d "+
		"lost=%d stuck=%d doubles=%d unapproved=%d misanswered=%d retry_refused=%d approval_missing=%d decision_anomalies=%d submit_anomalies=%d "+
		"replays=%d/%d contradictions=%d/%d effects=%d incomplete_inputs=%d audit=%s audit_repeats=%d elapsed=%s",
		verdict, r.Store, r.Replicas, r.Seed, r.Cycles, r.Kills, r.Acknowledged, r.Retried, r.Executed, r.Denied, r.Unknown6005, r.Ended,
		r.Lost, r.Stuck, r.Doubles, r.Unapproved, r.Misanswered, r.RetryRefused, r.ApprovalMissing, r.DecisionAnomalies, r.SubmitAnomalies,
		r.ReplaysSame, r.Replays, r.Conflicts, r.Contradictions, r.Effects, r.IncompleteInputs, r.AuditRecords, r.AuditRepeats, r.Elapsed.Round(time.Second))
}

const (
	senderAgent  = "agent:crash.client"
	gatewayAgent = "agent:crash.gateway"
	capability   = "crash.effect"
	reviewerID   = "crash-reviewer"
	// approvalTTL is how long a reviewer has; it bounds how long an
	// approval nobody decides keeps an exchange waiting.
	approvalTTL = 30 * time.Second
	// approvalWait is how long a cycle looks for its approval request
	// (less than approvalTTL: what it finds is still decidable).
	approvalWait = 20 * time.Second
	// finalWait is how long a cycle polls for its final answer before
	// leaving it to the settling at the end.
	finalWait = 10 * time.Second
	// cycleWait bounds each step of a cycle that waits for the gateway
	// (submitting, deciding, the final answer), restarts included.
	cycleWait = 45 * time.Second
	// settleWait is how long the driver waits at the end for every
	// exchange it knows of to reach its final answer.
	settleWait = approvalTTL + 40*time.Second
	startWait  = 60 * time.Second
)

// Driver runs one crash test. Close kills whatever it started.
type Driver struct {
	o        Options
	replicas []*replica
	client   *http.Client
	signer   sig.Signer
	kid      string
	token    string // the reviewer's API token
	effects  string // the side-effect log
	// incomplete counts the handler runs that got no whole request.
	incomplete string
	next       atomic.Uint64
	kills      atomic.Int64
	started    atomic.Int64

	snapMu   sync.Mutex
	snapshot map[string]aais.Request // pending approval requests by ARSIA message id
	snapAt   time.Time

	statsMu                                         sync.Mutex
	replays, replaysSame, contradictions, conflicts int
}

// New checks o and prepares the run's files: keys, configuration, the
// exec handler's script.
func New(o Options) (*Driver, error) {
	if o.Binary == "" || o.Dir == "" {
		return nil, errors.New("crashtest: Binary and Dir are required")
	}
	if o.Cycles == 0 {
		o.Cycles = 1000
	}
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.Replicas == 0 {
		o.Replicas = 2
		if o.Store == "" {
			o.Replicas = 1
		}
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Minute
	}
	if o.Cycles < 1 || o.Kills < 0 || o.Concurrency < 1 || o.Replicas < 1 || o.Timeout < 0 {
		return nil, fmt.Errorf("crashtest: cycles %d, kills %d, concurrency %d, replicas %d: cycles, concurrency and replicas must be positive, kills not negative",
			o.Cycles, o.Kills, o.Concurrency, o.Replicas)
	}
	if o.Store == "" && o.Replicas != 1 {
		return nil, errors.New("crashtest: several replicas need a shared postgres:// store")
	}
	if o.Store != "" && !strings.HasPrefix(o.Store, "postgres://") && !strings.HasPrefix(o.Store, "postgresql://") {
		return nil, errors.New("crashtest: the store must be a postgres:// URL")
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64() | 1
	}
	d := &Driver{o: o, client: &http.Client{Timeout: 20 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 4 * o.Concurrency, IdleConnTimeout: 30 * time.Second}}}
	if err := d.prepare(); err != nil {
		return nil, err
	}
	return d, nil
}

// effectScript is the exec handler: it appends the call's token to the
// side-effect log ($1) with one write to a file opened O_APPEND (">>"), and
// answers a JSON object. The arguments arrive on stdin as one line of
// compact JSON, {"token":"..."}. Like any real tool it does nothing with
// input that is not a whole request: a gateway killed after starting it
// but before writing its stdin leaves it an empty one (it notes that in
// $2, so the run can say how often it happened).
const effectScript = `IFS= read -r line
case $line in
'{"token":"tok-'*'"}') ;;
*) printf 'incomplete\n' >>"$2"; exit 4 ;;
esac
tok=${line#'{"token":"'}
tok=${tok%'"}'}
printf '%s\n' "$tok" >>"$1" || exit 3
printf '{"done":"%s"}' "$tok"
`

func (d *Driver) prepare() error {
	dir := d.o.Dir
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return err
	}
	d.kid = senderAgent + "#crash-1"
	if d.signer, err = sig.NewEd25519Signer(priv.Seed()); err != nil {
		return err
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: d.kid, Algorithm: "EdDSA", Use: "sig"}}})
	if err != nil {
		return err
	}
	jwksPath := filepath.Join(dir, "senders.jwks.json")
	if err := os.WriteFile(jwksPath, jwks, 0o600); err != nil {
		return err
	}
	var tok [16]byte
	for i := range tok {
		tok[i] = byte(rand.Uint32())
	}
	d.token = fmt.Sprintf("%x", tok[:])
	script := filepath.Join(dir, "effect.sh")
	if err := os.WriteFile(script, []byte(effectScript), 0o600); err != nil {
		return err
	}
	d.effects = filepath.Join(dir, "effects.log")
	d.incomplete = filepath.Join(dir, "incomplete.log")
	for _, f := range []string{d.effects, d.incomplete} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			return err
		}
	}
	for i := range d.o.Replicas {
		name := fmt.Sprintf("crash-gw-%d", i)
		data := filepath.Join(dir, "data"+fmt.Sprint(i))
		if err := os.MkdirAll(data, 0o700); err != nil {
			return err
		}
		var cfg strings.Builder
		fmt.Fprintf(&cfg, "listen: 127.0.0.1:0\ndata: %s\nagent: %s\n", yamlString(data), gatewayAgent)
		if d.o.Store != "" {
			fmt.Fprintf(&cfg, "store: %s\ninstance: %s\n", yamlString(d.o.Store), name)
		}
		fmt.Fprintf(&cfg, "trust:\n  jwks_files: [%s]\n", yamlString(jwksPath))
		fmt.Fprintf(&cfg, "senders:\n  - agent: %s\n    capabilities: [%q]\n", senderAgent, capability)
		fmt.Fprintf(&cfg, "handlers:\n  %s:\n    type: exec\n    command: [/bin/sh, %s, %s, %s]\n    timeout: 20s\n",
			capability, yamlString(script), yamlString(d.effects), yamlString(d.incomplete))
		fmt.Fprintf(&cfg, "oversight:\n  ttl: %s\n", approvalTTL)
		fmt.Fprintf(&cfg, "rate_limit:\n  per_second: 0\n")
		fmt.Fprintf(&cfg, "reviewers:\n  - id: %s\n    display_name: Crash Test Reviewer\n    token_sha256: %s\n", reviewerID, tokenHash(d.token))
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
			return err
		}
		d.replicas = append(d.replicas, &replica{name: name, binary: d.o.Binary, configPath: path,
			logPath: filepath.Join(dir, name+".log")})
	}
	return nil
}

// tokenHash is a token's token_sha256 as the reviewers section of the
// configuration takes it (docs/reviewers.md).
func tokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(h[:])
}

// yamlString quotes s for YAML (a JSON string is a YAML string).
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Close kills every child still running.
func (d *Driver) Close() {
	for _, r := range d.replicas {
		r.kill()
	}
	d.client.CloseIdleConnections()
}

func (d *Driver) progress(format string, args ...any) {
	if d.o.Progress != nil {
		fmt.Fprintf(d.o.Progress, "crashtest: "+format+"\n", args...)
	}
}

// cycle is one request's story as the client saw it.
type cycle struct {
	n                  int
	token, messageID   string
	idemKey            string
	deny               bool
	replay, contradict bool
	body               []byte
	decisionID         string

	acked      bool
	retried    bool
	refused    []string // unexpected answers to the submission
	exchangeID string
	actionID   string
	found      bool   // its approval request appeared
	outcome    string // the receipt's outcome for our decision
	final      int    // the final HTTP status, 0 if none seen
	finalASC   int
	finalBody  string
	lastState  string // what the status URL said last while not final
	anomalies  []string
}

// Run drives the cycles and the kills, waits for the gateway to settle,
// and checks the outcome. An error means the run could not be carried out
// (a child would not start, ctx ended); findings are in the Result.
func (d *Driver) Run(ctx context.Context) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	defer d.Close()
	start := time.Now()
	res := &Result{Seed: d.o.Seed, Cycles: d.o.Cycles, Replicas: d.o.Replicas, Store: "sqlite"}
	if d.o.Store != "" {
		res.Store = "postgres"
	}
	d.progress("seed %d, %d cycles, %d kills, %d replica(s) on %s, files in %s", d.o.Seed, d.o.Cycles, d.o.Kills, d.o.Replicas, res.Store, d.o.Dir)
	if err := d.replicas[0].start(ctx, startWait); err != nil {
		return nil, err
	}
	for _, r := range d.replicas[1:] {
		// Replicas answer as one agent: they share the gateway key the
		// first one created.
		key, err := os.ReadFile(filepath.Join(d.o.Dir, "data0", "gateway.key.jwk.json"))
		if err != nil {
			return nil, err
		}
		data := filepath.Join(d.o.Dir, "data"+strings.TrimPrefix(r.name, "crash-gw-"))
		if err := os.WriteFile(filepath.Join(data, "gateway.key.jwk.json"), key, 0o600); err != nil {
			return nil, err
		}
		if err := r.start(ctx, startWait); err != nil {
			return nil, err
		}
	}

	cycles := make([]*cycle, d.o.Cycles)
	for i := range cycles {
		cycles[i] = d.newCycle(i)
	}

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go d.pollSnapshots(runCtx)
	killErr := make(chan error, 1)
	go func() {
		err := d.killer(runCtx)
		if err != nil {
			stopRun() // the cycles cannot go on without the gateway
		}
		killErr <- err
	}()
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				d.progress("%d of %d cycles started after %s, %d kills", d.started.Load(), d.o.Cycles,
					time.Since(start).Round(time.Second), d.kills.Load())
			}
		}
	}()
	var wg sync.WaitGroup
	var nextCycle atomic.Int64
	for range d.o.Concurrency {
		wg.Go(func() {
			for {
				i := int(nextCycle.Add(1)) - 1
				if i >= len(cycles) || runCtx.Err() != nil {
					return
				}
				d.started.Add(1)
				d.run(runCtx, cycles[i])
			}
		})
	}
	wg.Wait()
	d.started.Store(int64(d.o.Cycles)) // every kill point is reached
	if err := <-killErr; err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("crashtest: the run did not finish within %s", d.o.Timeout)
	}
	res.Kills = int(d.kills.Load())
	d.progress("cycles done after %s; settling", time.Since(start).Round(time.Second))
	d.settle(ctx, cycles)
	stopRun()

	// Stop the gateways as an operator would, let any handler process
	// still running finish, then read what happened.
	for _, r := range d.replicas {
		if err := r.stop(15 * time.Second); err != nil {
			res.Problems = append(res.Problems, "stop: "+err.Error())
		}
	}
	time.Sleep(500 * time.Millisecond)
	counts, bad, err := readEffects(d.effects, cycles)
	if err != nil {
		return nil, err
	}
	d.check(res, cycles, counts, bad)
	if b, err := os.ReadFile(d.incomplete); err == nil {
		res.IncompleteInputs = bytes.Count(b, []byte("\n"))
	}
	d.verifyAudit(ctx, res)
	res.Elapsed = time.Since(start)
	return res, nil
}

// newCycle draws cycle n's plan from the seed: its token, its decision,
// whether it replays and contradicts it, whether it sends an
// Idempotency-Key.
func (d *Driver) newCycle(n int) *cycle {
	r := rand.New(rand.NewPCG(d.o.Seed, uint64(n)))
	c := &cycle{n: n, token: fmt.Sprintf("tok-%d-%016x", n, r.Uint64())}
	c.deny = r.IntN(5) == 0
	c.replay = r.IntN(3) == 0
	c.contradict = r.IntN(3) == 0
	if r.IntN(2) == 0 {
		c.idemKey = fmt.Sprintf("idem-%d-%016x", n, r.Uint64())
	}
	c.decisionID = fmt.Sprintf("dec_%032x", r.Uint64())
	return c
}

// sign builds and signs the cycle's request when it starts (its ts must be
// fresh); every retry sends these bytes again.
func (d *Driver) sign(c *cycle) error {
	e, err := arsia.NewRequest(senderAgent, gatewayAgent, []string{capability}, "com.crash/effect",
		map[string]any{"token": c.token}, arsia.BuildOptions{Now: time.Now(), TTL: time.Hour,
			Compliance: map[string]any{"profile": "EU-AI-ACT-HIGH-RISK"}})
	if err != nil {
		return err
	}
	env, err := e.Map()
	if err != nil {
		return err
	}
	signed, err := sig.Sign(env, d.signer, d.kid)
	if err != nil {
		return err
	}
	c.messageID, _ = signed["id"].(string)
	c.body, err = json.Marshal(signed)
	return err
}

// pick returns the base URL of a running replica, alternating between
// them; "" when none is up.
func (d *Driver) pick() string {
	n := d.next.Add(1)
	for i := range uint64(len(d.replicas)) {
		if u := d.replicas[(n+i)%uint64(len(d.replicas))].base(); u != "" {
			return u
		}
	}
	return ""
}

// answer is one HTTP exchange's outcome; status 0 means no answer (the
// connection failed or was reset, or no replica was up).
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (d *Driver) do(ctx context.Context, method, path string, body []byte, hdr map[string]string) answer {
	base := d.pick()
	if base == "" {
		return answer{err: errors.New("no replica up")}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return answer{err: err}
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		// The headers came but the body was cut: no answer either.
		return answer{err: err}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// persist repeats an idempotent request until it gets an HTTP answer or
// the cycle's wait is over; it reports whether it had to repeat it.
func (d *Driver) persist(ctx context.Context, method, path string, body []byte, hdr map[string]string) (answer, bool) {
	deadline := time.Now().Add(cycleWait)
	repeated := false
	for attempt := 0; ; attempt++ {
		a := d.do(ctx, method, path, body, hdr)
		if a.status != 0 || ctx.Err() != nil || time.Now().After(deadline) || attempt > 2000 {
			return a, repeated
		}
		repeated = true
		sleep(ctx, time.Duration(20+min(attempt, 10)*20)*time.Millisecond)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// run is one cycle: submit, find the approval, decide (replay,
// contradict), wait for the final answer.
func (d *Driver) run(ctx context.Context, c *cycle) {
	if err := d.sign(c); err != nil {
		c.refused = append(c.refused, "signing: "+err.Error())
		return
	}
	hdr := map[string]string{"Content-Type": "application/arsia+json; v=1"}
	if c.idemKey != "" {
		hdr["Idempotency-Key"] = c.idemKey
	}
	deadline := time.Now().Add(cycleWait)
	for attempt := 0; attempt < 50 && ctx.Err() == nil; attempt++ {
		a, repeated := d.persist(ctx, "POST", "/v1/arsia/inbox", c.body, hdr)
		if repeated || attempt > 0 {
			c.retried = true
		}
		if a.status == 0 {
			c.refused = append(c.refused, fmt.Sprintf("no answer within %s: %v", cycleWait, a.err))
			break
		}
		if a.status == http.StatusAccepted {
			c.acked = true
			c.exchangeID = a.header.Get("Custos-Exchange")
			var env struct {
				Payload struct {
					ActionID string `json:"action_id"`
				} `json:"payload"`
			}
			_ = json.Unmarshal(a.body, &env)
			c.actionID = env.Payload.ActionID
			break
		}
		if a.status == http.StatusConflict && c.retried {
			// The same bytes again: the first reply was due (docs/gateway.md).
			c.refused = append(c.refused, fmt.Sprintf("%s %d: %s", retryRefusedPrefix, a.status, clip(a.body)))
			break
		}
		if id := a.header.Get("Custos-Exchange"); id != "" && c.retried {
			// A retry answered with the exchange's final reply: the gateway
			// ended the request (or ran it) while the sender was away.
			c.acked, c.exchangeID = true, id
			c.final, c.finalASC, c.finalBody = a.status, ascOf(a.body), clip(a.body)
			break
		}
		c.refused = append(c.refused, fmt.Sprintf("submission %s answered %d: %s", attemptName(c.retried), a.status, clip(a.body)))
		if a.status < 500 || !errorRetryable(a.body) || time.Now().After(deadline) {
			break
		}
		c.retried = true
		sleep(ctx, 100*time.Millisecond)
	}
	if c.final != 0 {
		return
	}
	// A reviewer decides what the inbox shows, acknowledged or not.
	req, ok := d.findApproval(ctx, c)
	if !ok {
		if c.acked {
			d.awaitFinal(ctx, c, 2*time.Second) // it may have ended otherwise
		}
		return
	}
	c.found = true
	if c.exchangeID == "" {
		c.exchangeID = exchangeOf(req)
	}
	verdict := aais.Approve
	if c.deny {
		verdict = aais.Deny
	}
	body, err := decisionBody(&req, c.decisionID, verdict)
	if err != nil {
		c.anomalies = append(c.anomalies, "building the decision: "+err.Error())
		return
	}
	path := "/approvals/" + req.ID + "/decisions"
	auth := map[string]string{"Authorization": "Bearer " + d.token, "Content-Type": "application/json"}
	a, _ := d.persist(ctx, "POST", path, body, auth)
	receipt, err := parseReceipt(a)
	if err != nil {
		c.anomalies = append(c.anomalies, fmt.Sprintf("decision %s: %v", verdict, err))
	} else {
		c.outcome = string(receipt.Outcome)
		if a.status != http.StatusOK || (receipt.Outcome != aais.OutcomeApproved && receipt.Outcome != aais.OutcomeDenied) {
			c.anomalies = append(c.anomalies, fmt.Sprintf("decision %s answered %d outcome %s", verdict, a.status, receipt.Outcome))
		}
	}
	if c.replay && receipt != nil {
		a, _ := d.persist(ctx, "POST", path, body, auth)
		again, err := parseReceipt(a)
		c.anomalies = appendIf(c.anomalies, err != nil || a.status != http.StatusOK || again.ID != receipt.ID || again.Outcome != receipt.Outcome,
			fmt.Sprintf("replay answered %d %s, first receipt %s", a.status, clip(a.body), receipt.ID))
		d.countReplay(err == nil && a.status == http.StatusOK && again.ID == receipt.ID && again.Outcome == receipt.Outcome)
	}
	if c.contradict && receipt != nil {
		other := aais.Deny
		if verdict == aais.Deny {
			other = aais.Approve
		}
		body2, err := decisionBody(&req, c.decisionID+"x", other)
		if err == nil {
			a, _ := d.persist(ctx, "POST", path, body2, auth)
			c.anomalies = appendIf(c.anomalies, a.status != http.StatusConflict,
				fmt.Sprintf("contradiction answered %d %s", a.status, clip(a.body)))
			d.countContradiction(a.status == http.StatusConflict)
		}
	}
	if c.exchangeID != "" {
		// Not longer: a stuck exchange must not hold a worker; settle
		// looks at it again at the end.
		d.awaitFinal(ctx, c, finalWait)
	}
}

func (d *Driver) countReplay(same bool) {
	d.statsMu.Lock()
	defer d.statsMu.Unlock()
	d.replays++
	if same {
		d.replaysSame++
	}
}

func (d *Driver) countContradiction(conflict bool) {
	d.statsMu.Lock()
	defer d.statsMu.Unlock()
	d.contradictions++
	if conflict {
		d.conflicts++
	}
}

func appendIf(list []string, cond bool, s string) []string {
	if cond {
		return append(list, s)
	}
	return list
}

// retryRefusedPrefix marks a retry of the same signed bytes answered 409.
const retryRefusedPrefix = "submission retry refused:"

func attemptName(retried bool) string {
	if retried {
		return "retry"
	}
	return "first try"
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// errorRetryable reads payload.error.retryable of an ARSIA error.
func errorRetryable(body []byte) bool {
	var env struct {
		Payload struct {
			Error struct {
				Retryable bool `json:"retryable"`
			} `json:"error"`
		} `json:"payload"`
	}
	return json.Unmarshal(body, &env) == nil && env.Payload.Error.Retryable
}

// ascOf reads payload.error.details.agent_status.code, 0 when absent.
func ascOf(body []byte) int {
	var env struct {
		Payload struct {
			Error struct {
				Details struct {
					AgentStatus struct {
						Code int `json:"code"`
					} `json:"agent_status"`
				} `json:"details"`
			} `json:"error"`
		} `json:"payload"`
	}
	_ = json.Unmarshal(body, &env)
	return env.Payload.Error.Details.AgentStatus.Code
}

func decisionBody(req *aais.Request, id string, v aais.Verdict) ([]byte, error) {
	dec, err := aais.NewDecision(req, aais.DecisionParams{ID: id, Decision: v, Scope: aais.ScopeOnce,
		Actor: aais.Actor{ID: reviewerID, Type: aais.ActorHuman}, DecidedAt: time.Now()})
	if err != nil {
		return nil, err
	}
	m, err := aais.NewMessage(aais.Header{OccurredAt: time.Now()}, dec)
	if err != nil {
		return nil, err
	}
	return aais.Marshal(m)
}

func parseReceipt(a answer) (*aais.Resolution, error) {
	if a.status == 0 {
		return nil, fmt.Errorf("no answer: %v", a.err)
	}
	m, err := aais.Parse(a.body)
	if err != nil || m.Resolution == nil {
		return nil, fmt.Errorf("answered %d without a receipt: %s", a.status, clip(a.body))
	}
	return m.Resolution, nil
}

// exchangeOf reads the exchange id the gateway put in its approval
// request.
func exchangeOf(req aais.Request) string {
	var ref struct {
		ExchangeID string `json:"exchange_id"`
	}
	_ = json.Unmarshal(req.Extensions["custos.dev/exchange"], &ref)
	return ref.ExchangeID
}

func messageOf(req aais.Request) string {
	var ref struct {
		MessageID string `json:"message_id"`
	}
	_ = json.Unmarshal(req.Extensions["custos.dev/exchange"], &ref)
	return ref.MessageID
}

// pollSnapshots keeps the pending approval requests the reviewers' API
// shows, so cycles find theirs without each fetching the whole list.
func (d *Driver) pollSnapshots(ctx context.Context) {
	for ctx.Err() == nil {
		a := d.do(ctx, "GET", "/approvals/snapshot", nil, map[string]string{"Authorization": "Bearer " + d.token})
		if a.status == http.StatusOK {
			if m, err := aais.Parse(a.body); err == nil && m.Snapshot != nil {
				byMsg := make(map[string]aais.Request, len(m.Snapshot.Pending))
				for _, r := range m.Snapshot.Pending {
					byMsg[messageOf(r)] = r
				}
				d.snapMu.Lock()
				d.snapshot, d.snapAt = byMsg, time.Now()
				d.snapMu.Unlock()
			}
		}
		sleep(ctx, 50*time.Millisecond)
	}
}

func (d *Driver) findApproval(ctx context.Context, c *cycle) (aais.Request, bool) {
	deadline := time.Now().Add(approvalWait)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		d.snapMu.Lock()
		r, ok := d.snapshot[c.messageID]
		d.snapMu.Unlock()
		if ok && (c.actionID == "" || r.ID == c.actionID) {
			return r, true
		}
		sleep(ctx, 30*time.Millisecond)
	}
	return aais.Request{}, false
}

// awaitFinal polls the status URL until the exchange has a final answer
// or wait is over.
func (d *Driver) awaitFinal(ctx context.Context, c *cycle, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for attempt := 0; attempt < 100000 && ctx.Err() == nil; attempt++ {
		a := d.do(ctx, "GET", "/v1/arsia/exchanges/"+c.exchangeID, nil, nil)
		switch {
		case a.status == http.StatusAccepted:
			c.lastState = "202 " + intentOf(a.body)
		case a.status != 0:
			if a.status == http.StatusNotFound {
				c.lastState = "404 " + clip(a.body)
				break
			}
			c.final, c.finalASC, c.finalBody = a.status, ascOf(a.body), clip(a.body)
			return
		}
		if time.Now().After(deadline) {
			return
		}
		sleep(ctx, time.Duration(30+min(attempt, 20)*10)*time.Millisecond)
	}
}

func intentOf(body []byte) string {
	var env struct {
		Intent string `json:"intent"`
	}
	_ = json.Unmarshal(body, &env)
	return env.Intent
}

// killer kills a replica at each of o.Kills moments spread over the run
// (after a seeded number of started cycles, plus a seeded delay, so that
// it lands inside some cycle's step) and starts it again on the same data
// directory at once.
func (d *Driver) killer(ctx context.Context) error {
	r := rand.New(rand.NewPCG(d.o.Seed, 1<<63))
	points := make([]int, d.o.Kills)
	span := max(1, d.o.Cycles*9/10)
	for i := range points {
		points[i] = r.IntN(span)
	}
	slices.Sort(points)
	for k, p := range points {
		for int(d.started.Load()) <= p {
			if ctx.Err() != nil {
				return nil
			}
			sleep(ctx, 2*time.Millisecond)
		}
		sleep(ctx, time.Duration(r.IntN(40))*time.Millisecond)
		if ctx.Err() != nil {
			return nil
		}
		victim := d.replicas[r.IntN(len(d.replicas))]
		victim.kill()
		d.kills.Add(1)
		down := time.Now()
		at := d.started.Load()
		sleep(ctx, time.Duration(r.IntN(200))*time.Millisecond)
		if err := victim.start(ctx, startWait); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("restarting %s after kill %d: %w", victim.name, k+1, err)
		}
		d.progress("kill %d/%d: %s after %d started cycles, ready again after %s", k+1, d.o.Kills, victim.name, at,
			time.Since(down).Round(time.Millisecond))
	}
	return nil
}

// settle waits until every exchange a cycle knows of has its final
// answer, or settleWait has passed.
func (d *Driver) settle(ctx context.Context, cycles []*cycle) {
	deadline := time.Now().Add(settleWait)
	for ctx.Err() == nil {
		open := 0
		for _, c := range cycles {
			if c.exchangeID != "" && c.final == 0 {
				d.awaitFinal(ctx, c, 0)
				if c.final == 0 {
					open++
				}
			}
		}
		if open == 0 || time.Now().After(deadline) {
			d.progress("settled: %d exchange(s) without a final answer", open)
			return
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

var tokenRE = regexp.MustCompile(`^tok-[0-9]+-[0-9a-f]{16}$`)

// readEffects counts each token's lines in the side-effect log; bad lists
// the lines that are no token of this run.
func readEffects(path string, cycles []*cycle) (map[string]int, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	known := make(map[string]bool, len(cycles))
	for _, c := range cycles {
		known[c.token] = true
	}
	counts := map[string]int{}
	var bad []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !tokenRE.MatchString(line) || !known[line] {
			bad = append(bad, line)
			continue
		}
		counts[line]++
	}
	return counts, bad, sc.Err()
}

// check classifies each cycle by what it saw and what the log holds.
func (d *Driver) check(res *Result, cycles []*cycle, counts map[string]int, bad []string) {
	examples := map[string]int{}
	problem := func(kind string, c *cycle, format string, args ...any) {
		examples[kind]++
		if examples[kind] > 5 {
			return
		}
		res.Problems = append(res.Problems, fmt.Sprintf("%s: cycle %d token %s message %s exchange %s idempotency-key %q acked=%v retried=%v approval_found=%v outcome=%q final=%d asc=%d last_seen=%q: %s",
			kind, c.n, c.token, c.messageID, c.exchangeID, c.idemKey, c.acked, c.retried, c.found, c.outcome, c.final, c.finalASC, c.lastState, fmt.Sprintf(format, args...)))
	}
	d.statsMu.Lock()
	res.Replays, res.ReplaysSame, res.Contradictions, res.Conflicts = d.replays, d.replaysSame, d.contradictions, d.conflicts
	d.statsMu.Unlock()
	for _, line := range bad {
		res.BadLines++
		if res.BadLines <= 5 {
			res.Problems = append(res.Problems, fmt.Sprintf("bad line in the side-effect log: %q", line))
		}
	}
	for _, n := range counts {
		res.Effects += n
	}
	for _, c := range cycles {
		n := counts[c.token]
		approved := c.outcome == string(aais.OutcomeApproved)
		if c.acked {
			res.Acknowledged++
		}
		if c.retried {
			res.Retried++
		}
		switch c.outcome {
		case string(aais.OutcomeApproved):
			res.Approved++
		case string(aais.OutcomeDenied):
			res.Denied++
		}
		if n > 1 {
			res.Doubles++
			problem("double", c, "the token is in the side-effect log %d times", n)
		}
		if n > 0 && !approved {
			res.Unapproved++
			problem("unapproved", c, "ran without an approval (deny planned %v)", c.deny)
		}
		refusedRetry := slices.ContainsFunc(c.refused, func(r string) bool { return strings.HasPrefix(r, retryRefusedPrefix) })
		if refusedRetry {
			res.RetryRefused++
			problem("retry_refused", c, "%s", strings.Join(c.refused, "; "))
		}
		if !c.acked && len(c.refused) > 0 && !refusedRetry {
			res.SubmitAnomalies++
			problem("submission", c, "%s", strings.Join(c.refused, "; "))
		}
		if len(c.anomalies) > 0 {
			res.DecisionAnomalies++
			problem("decision", c, "%s", strings.Join(c.anomalies, "; "))
		}
		if c.acked && !c.found {
			res.ApprovalMissing++
			problem("approval_missing", c, "acknowledged, but no approval request for it appeared within %s", approvalWait)
		}
		switch {
		case approved:
			switch {
			case c.final == http.StatusOK && n == 1:
				res.Executed++
			case c.final != 0 && c.finalASC == int(asc.ResultStateUnknown):
				res.Unknown6005++
			case c.final == 0:
				res.Lost++
				problem("lost", c, "approved, ran %d time(s), and the sender never got a final answer", n)
			case c.final == http.StatusOK:
				res.Lost++
				problem("lost", c, "approved and answered 200, but ran %d time(s): %s", n, c.finalBody)
			default:
				res.Misanswered++
				problem("misanswered", c, "approved, ran %d time(s), answered %d ASC %d instead of running or 6005: %s", n, c.final, c.finalASC, c.finalBody)
			}
		case c.outcome == string(aais.OutcomeDenied) && c.final == http.StatusOK:
			res.Misanswered++
			problem("misanswered", c, "denied, yet answered 200: %s", c.finalBody)
		case c.exchangeID != "" && c.final == 0:
			res.Stuck++
			problem("stuck", c, "no final answer after settling %s", settleWait)
		case c.exchangeID != "" && c.outcome == "" && c.final != 0:
			res.Ended++
		}
	}
	sort.Strings(res.Problems)
}

var (
	recordsRE = regexp.MustCompile(`(\d+) records`)
	repeatsRE = regexp.MustCompile(`(\d+) approval records repeat`)
)

// verifyAudit runs `custos audit verify` on the run's audit log.
func (d *Driver) verifyAudit(ctx context.Context, res *Result) {
	log := filepath.Join(d.o.Dir, "data0", "custos.db")
	if d.o.Store != "" {
		log = d.o.Store
	}
	out, err := runBinary(ctx, d.o.Binary, 5*time.Minute, "audit", "verify", "--log", log)
	res.AuditOutput = strings.TrimSpace(out)
	if m := repeatsRE.FindStringSubmatch(out); m != nil {
		res.AuditRepeats, _ = strconv.Atoi(m[1])
	}
	if m := recordsRE.FindStringSubmatch(out); m != nil {
		res.AuditRecords = m[1] + "-records"
	}
	if err != nil {
		res.AuditRecords = "FAILED"
		res.Problems = append(res.Problems, fmt.Sprintf("custos audit verify: %v: %s", err, strings.TrimSpace(out)))
		return
	}
	res.AuditOK = true
	if res.AuditRecords == "" {
		res.AuditRecords = "verified"
	}
}
