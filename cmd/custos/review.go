package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/client"
	"github.com/custos-runtime/custos/httpapi"
)

// custos review is the terminal reviewer: the live approval queue of a
// running custos serve, over its HTTP API (the AAIS HTTP + SSE binding),
// with the reviewer's API token. Unlike custos approvals it never opens a
// store: the server authenticates the token, applies its policy and
// records the token's reviewer as the actor of every decision.

// Timing of the event stream; tests shorten them.
var (
	// reviewBackoffMin and reviewBackoffMax bound the wait before
	// reconnecting a dropped event stream (doubling in between).
	reviewBackoffMin = 500 * time.Millisecond
	reviewBackoffMax = 30 * time.Second
	// reviewIdle is how long a stream may stay silent (the server sends a
	// keepalive every 15 s) before it is taken for dead and reopened.
	reviewIdle = 45 * time.Second
)

type reviewConfig struct {
	server, token string
	once, asJSON  bool
}

func newReviewCommand() *cobra.Command {
	cfg := &reviewConfig{}
	cmd := &cobra.Command{
		Use:   "review",
		Short: "Review the live approval queue of a running custos serve, in the terminal",
		Long: `Review pending approval requests of a running custos serve over its HTTP API,
as the reviewer its API token names (--token or $CUSTOS_TOKEN; the login
token custos serve prints works too; prefer the variable: other users can
read a flag in the process list). The server is --server or
$CUSTOS_SERVER (http://127.0.0.1:8080 for a local custos serve).

The queue is numbered and updates by itself from the server's event stream:
new requests appear, decided ones disappear; a dropped connection is
reopened with backoff and resumed where it stopped. Commands, one per line:

  list                         the pending requests again
  show N                       everything about request N: what runs, its
                               digest, risk, origin, deadline, the choices
                               and whether you may decide it
  approve N [once|session|persistent] [-- JUSTIFICATION]
  deny N [-- JUSTIFICATION]    decide; without "-- text" the justification is
                               asked for (required to approve under some
                               compliance profiles)
  history                      the latest resolutions
  rules                        remembered approvals (session, persistent)
  revoke RULE_ID               revoke one
  help, quit

N is the number in the list or the request id. Decisions are recorded as
the token's reviewer: the server never trusts an actor sent by a client.
With --once the queue is printed and the command exits; --json prints the
approval.snapshot message instead. Colours only on a terminal, and never
when NO_COLOR is set.`,
		Example: `  custos review --server http://127.0.0.1:8080 --token "$TOKEN"
  CUSTOS_SERVER=http://127.0.0.1:8080 CUSTOS_TOKEN=... custos review --once
  echo 'approve 1 once -- matches PO-2291' | custos review`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The environment is read here, not as flag defaults, so that
			// --help never prints the token.
			if cfg.server == "" {
				cfg.server = os.Getenv("CUSTOS_SERVER")
			}
			if cfg.token == "" {
				cfg.token = os.Getenv("CUSTOS_TOKEN")
			}
			if cfg.server == "" {
				return usageError{errors.New("review: name the server with --server or $CUSTOS_SERVER")}
			}
			if cfg.token == "" {
				return usageError{errors.New("review: give an API token with --token or $CUSTOS_TOKEN")}
			}
			c, err := newReviewClient(cfg.server, cfg.token, cmd.ErrOrStderr())
			if err != nil {
				return usageError{err}
			}
			r := newReviewer(c, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			if cfg.asJSON {
				return r.printSnapshotJSON(cmd.Context())
			}
			if cfg.once {
				return r.printOnce(cmd.Context())
			}
			return r.interactive(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&cfg.server, "server", "", "the custos serve URL (default $CUSTOS_SERVER)")
	cmd.Flags().StringVar(&cfg.token, "token", "", "the reviewer's API token (default $CUSTOS_TOKEN)")
	cmd.Flags().BoolVar(&cfg.once, "once", false, "print the pending requests and exit")
	cmd.Flags().BoolVar(&cfg.asJSON, "json", false, "print the approval.snapshot message as JSON and exit")
	return cmd
}

// newReviewClient is the approvals API client of the reviewer. Plain http
// to another host is allowed, with a warning: the token travels
// unencrypted.
func newReviewClient(server, token string, stderr io.Writer) (*client.Approvals, error) {
	u, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("review: --server %q is not an http:// or https:// URL", server)
	}
	c, err := client.NewApprovals(server, token, &client.ApprovalsOptions{AllowInsecureHTTP: true})
	if err != nil {
		return nil, fmt.Errorf("review: %w", err)
	}
	if u.Scheme == "http" && !arsia.IsLoopbackHost(u.Hostname()) {
		fmt.Fprintf(stderr, "custos: warning: %s is plain http: the token travels unencrypted\n", u.Host)
	}
	return c, nil
}

// ---- the reviewer ----

// reviewer keeps the presenter's copy of the queue (an aais.View rebuilt
// from the snapshot and the event stream) and the numbers shown for it.
type reviewer struct {
	c      *client.Approvals
	in     io.Reader
	out    *lockedWriter
	errOut *lockedWriter
	color  bool
	prompt bool

	mu       sync.Mutex
	me       client.Me
	view     aais.View
	num      map[string]int // request id → its number, never reused
	ids      map[int]string
	next     int
	shown    map[string]bool // pending requests the reviewer was told about
	resolved map[string]*aais.Resolution
	// snap is the snapshot load took, where the event stream starts.
	snap *aais.Message
}

// lockedWriter writes whole blocks from several goroutines without
// interleaving them.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newReviewer(c *client.Approvals, in io.Reader, out, errOut io.Writer) *reviewer {
	return &reviewer{
		c: c, in: in,
		out: &lockedWriter{w: out}, errOut: &lockedWriter{w: errOut},
		color:  colorOK(out),
		prompt: isTerminal(in),
		num:    map[string]int{}, ids: map[int]string{}, shown: map[string]bool{},
		resolved: map[string]*aais.Resolution{},
	}
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// colorOK: colours only on a terminal, and not when NO_COLOR is set
// (https://no-color.org) or the terminal is dumb.
func colorOK(out io.Writer) bool {
	return isTerminal(out) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

func (r *reviewer) paint(code, s string) string {
	if !r.color || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// Every colour code has two digits, so that tabwriter columns stay aligned.
func (r *reviewer) risk(level aais.RiskLevel) string {
	code := map[aais.RiskLevel]string{aais.RiskLow: "32", aais.RiskMedium: "33", aais.RiskHigh: "31"}[level]
	if code == "" {
		code = "35"
	}
	return r.paint(code, visible(string(level)))
}

func (r *reviewer) outcome(o aais.Outcome) string {
	if o == aais.OutcomeApproved {
		return r.paint("32", string(o))
	}
	return r.paint("31", string(o))
}

func (r *reviewer) say(format string, args ...any) {
	fmt.Fprintf(r.out, format, args...)
}

// note reports the state of the connection on standard error.
func (r *reviewer) note(format string, args ...any) {
	fmt.Fprintf(r.errOut, "custos: "+format+"\n", args...)
}

// visible shows control, format (bidi, zero-width) and line-separator
// characters of untrusted text as ⟨U+XXXX⟩, so that a value can neither
// drive the terminal nor disguise itself; with block, newlines are kept.
func visible(s string) string { return visibleText(s, false) }

func visibleText(s string, block bool) string {
	clean := true
	for _, c := range s {
		if c == utf8.RuneError || unicode.IsControl(c) || unicode.Is(unicode.Cf, c) || c == '\u2028' || c == '\u2029' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		switch {
		case c == '\n' && block:
			b.WriteByte('\n')
		case c == utf8.RuneError && strings.HasPrefix(s[i:], "\uFFFD"):
			b.WriteRune(c)
		case c == utf8.RuneError:
			fmt.Fprintf(&b, "⟨%#02x⟩", s[i])
		case unicode.IsControl(c) || unicode.Is(unicode.Cf, c) || c == '\u2028' || c == '\u2029':
			fmt.Fprintf(&b, "⟨U+%04X⟩", c)
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// load asks who the token belongs to and takes the first snapshot.
func (r *reviewer) load(ctx context.Context) error {
	me, err := r.c.Me(ctx)
	if err != nil {
		return fmt.Errorf("GET /approvals/me: %w", err)
	}
	snap, err := r.c.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("GET /approvals/snapshot: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.me = *me
	r.snap = snap
	if err := r.view.Restore(snap); err != nil {
		return err
	}
	for _, req := range r.view.Pending(time.Now()) {
		r.number(req.ID)
		r.shown[req.ID] = true
	}
	return nil
}

// number returns the request's number, giving it the next one if new.
// The caller holds r.mu.
func (r *reviewer) number(id string) int {
	if n, ok := r.num[id]; ok {
		return n
	}
	r.next++
	r.num[id], r.ids[r.next] = r.next, id
	return r.next
}

func (r *reviewer) printSnapshotJSON(ctx context.Context) error {
	snap, err := r.c.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("GET /approvals/snapshot: %w", err)
	}
	return printMessage(r.out, snap)
}

func (r *reviewer) printOnce(ctx context.Context) error {
	if err := r.load(ctx); err != nil {
		return err
	}
	r.printWho()
	r.printList()
	return nil
}

func (r *reviewer) printWho() {
	r.mu.Lock()
	me := r.me
	r.mu.Unlock()
	who := visible(me.Actor.ID)
	if me.Actor.DisplayName != "" {
		who += " (" + visible(me.Actor.DisplayName) + ")"
	}
	roles := "no roles"
	if len(me.Roles) > 0 {
		roles = "roles " + visible(strings.Join(me.Roles, ", "))
	}
	r.say("Reviewing %s as %s, %s.\n", r.c.Server(), who, roles)
}

// printList prints the numbered queue.
func (r *reviewer) printList() {
	r.mu.Lock()
	defer r.mu.Unlock()
	pending := r.pending(time.Now())
	var b bytes.Buffer
	if len(pending) == 0 {
		b.WriteString("No pending requests.\n")
	} else {
		fmt.Fprintf(&b, "%d pending:\n", len(pending))
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tRISK\tACTION\tFROM\tPROFILE\tTIME LEFT\tSUMMARY")
		for i := range pending {
			req := &pending[i]
			n := r.number(req.ID)
			r.shown[req.ID] = true
			fmt.Fprintf(tw, "  %d\t%s\n", n, r.row(req, "\t"))
		}
		_ = tw.Flush()
	}
	_, _ = r.out.Write(b.Bytes())
}

// row is a request's line in the queue, its cells joined by sep.
func (r *reviewer) row(req *aais.Request, sep string) string {
	from := req.Origin.AgentID
	if from == "" {
		from = req.Origin.SessionID
	}
	profile := httpapi.RequestProfile(req)
	if profile == "" {
		profile = "-"
	}
	return strings.Join([]string{r.risk(req.Risk.Level), visible(req.Action.Name()), visible(from), visible(profile),
		expiry(req.ExpiresAt, time.Now()), visible(oneLine(req.Action.Summary(), 60))}, sep)
}

// pending is the queue: the view's pending requests that have not
// expired and that no receipt seen here resolved. The caller holds r.mu.
func (r *reviewer) pending(now time.Time) []aais.Request {
	all := r.view.Pending(now)
	out := all[:0]
	for _, req := range all {
		if r.resolved[req.ID] == nil {
			out = append(out, req)
		}
	}
	return out
}

// sync tells the reviewer which requests appeared and which are gone since
// the last time. The caller holds r.mu.
func (r *reviewer) sync() {
	var b bytes.Buffer
	now := time.Now()
	current := map[string]bool{}
	for _, req := range r.pending(now) {
		current[req.ID] = true
		if !r.shown[req.ID] {
			r.shown[req.ID] = true
			fmt.Fprintf(&b, "+ #%d new request: %s\n", r.number(req.ID), r.row(&req, "  "))
		}
	}
	gone := []string{}
	for id := range r.shown {
		if !current[id] {
			gone = append(gone, id)
		}
	}
	sort.Slice(gone, func(i, j int) bool { return r.num[gone[i]] < r.num[gone[j]] })
	for _, id := range gone {
		delete(r.shown, id)
		fmt.Fprintf(&b, "- #%d %s %s\n", r.num[id], visible(id), r.goneWords(id, now))
	}
	if b.Len() > 0 {
		_, _ = r.out.Write(b.Bytes())
	}
}

// goneWords says how a request left the queue. The caller holds r.mu.
func (r *reviewer) goneWords(id string, now time.Time) string {
	res := r.resolved[id]
	if res == nil {
		if req, ok := r.view.Get(id); ok && !req.ExpiresAt.IsZero() && !now.Before(req.ExpiresAt.Time()) {
			return "expired"
		}
		return "is no longer pending"
	}
	s := r.outcome(res.Outcome)
	if res.EffectiveScope != "" {
		s += " (" + string(res.EffectiveScope) + ")"
	}
	if actor, _, ok := aais.DecidedBy(res); ok {
		s += " by " + visible(actor.ID)
	} else if raw, ok := res.Extensions[aais.RuleExtension]; ok {
		var ref struct {
			RuleID string `json:"rule_id"`
		}
		if json.Unmarshal(raw, &ref) == nil {
			s += " by rule " + visible(ref.RuleID)
		}
	}
	return s
}

// apply applies one message of the event stream. An error means the view
// cannot continue from it: take a new snapshot.
func (r *reviewer) apply(m *aais.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch m.Type {
	case aais.TypeSnapshot:
		if err := r.view.Restore(m); err != nil {
			return err
		}
		// The snapshot is the authority's word on what is pending.
		for _, req := range m.Snapshot.Pending {
			delete(r.resolved, req.ID)
		}
	case aais.TypeRequested, aais.TypeResolved:
		applied, err := r.view.Apply(m)
		if err != nil {
			return err
		}
		if applied && m.Type == aais.TypeResolved {
			r.resolved[m.Resolution.RequestID] = m.Resolution
		}
	case aais.TypeActivity:
		// A vote towards a quorum is in the log: it moves the position on.
		if !aais.Partial(m) {
			return nil
		}
		if _, err := r.view.Apply(m); err != nil {
			return err
		}
	default:
		return nil
	}
	r.sync()
	return nil
}

// restore replaces the view from a fresh snapshot.
func (r *reviewer) restore(ctx context.Context) error {
	snap, err := r.c.Snapshot(ctx)
	if err != nil {
		return err
	}
	return r.apply(snap)
}

// ---- the event stream ----

// follow keeps the view current from the event stream until ctx ends: the
// client reconnects with backoff, resumes with Last-Event-ID and takes a
// fresh snapshot when events were missed; the reviewer hears of each.
func (r *reviewer) follow(ctx context.Context) {
	r.mu.Lock()
	snap := r.snap
	r.mu.Unlock()
	err := r.c.Watch(ctx, client.WatchOptions{Snapshot: snap, BackoffMin: reviewBackoffMin, BackoffMax: reviewBackoffMax,
		Idle: reviewIdle, Notify: r.notice}, func(ev client.Event) error {
		if err := r.apply(ev.Message); err != nil {
			// This copy could not take it (a receipt seen here moved it):
			// the server's snapshot is the authority.
			r.note("%v; rebuilding the list from a fresh snapshot", err)
			if err := r.restore(ctx); err != nil && ctx.Err() == nil {
				r.note("snapshot failed: %v", err)
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		r.note("event stream ended: %v", err)
	}
}

// notice tells the reviewer what happened to the event stream.
func (r *reviewer) notice(n client.Notice) {
	switch n.Kind {
	case client.NoticeLost:
		r.note("event stream lost (%v); reconnecting in %s", n.Err, n.RetryIn)
	case client.NoticeReconnected:
		r.note("event stream reconnected")
	case client.NoticeGap:
		r.note("the server could not continue from event %d (store reset or compacted); the list is rebuilt from its new snapshot", n.Sequence)
	case client.NoticeResync:
		r.note("%v; rebuilding the list from a fresh snapshot", n.Err)
	case client.NoticeSnapshotFailed:
		r.note("snapshot failed: %v", n.Err)
	case client.NoticeMalformed:
		r.note("ignoring a malformed %s event: %v", visible(n.Event), n.Err)
	case client.NoticeCutoff:
		r.note("the server ended the event stream (%s); resuming", visible(n.Err.Error()))
	}
}

// ---- the command loop ----

func (r *reviewer) interactive(ctx context.Context) error {
	if err := r.load(ctx); err != nil {
		return err
	}
	r.printWho()
	r.printList()
	r.say("Type help for the commands.\n")

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { r.follow(ctx) })
	defer wg.Wait()
	defer cancel()

	lines := make(chan string)
	go readLines(ctx, r.in, lines)
	for {
		if r.prompt {
			r.say("> ")
		}
		line, ok := nextLine(ctx, lines)
		if !ok || r.command(ctx, line, lines) {
			return nil
		}
	}
}

// readLines sends each line of in until it ends or ctx is done.
func readLines(ctx context.Context, in io.Reader, lines chan<- string) {
	defer close(lines)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		select {
		case lines <- sc.Text():
		case <-ctx.Done():
			return
		}
	}
}

func nextLine(ctx context.Context, lines <-chan string) (string, bool) {
	select {
	case <-ctx.Done():
		return "", false
	case l, ok := <-lines:
		return l, ok
	}
}

const reviewHelp = `Commands:
  list                               the pending requests
  show N                             what request N would run, its choices, whether you may decide
  approve N [once|session|persistent] [-- JUSTIFICATION]
  deny N [-- JUSTIFICATION]          decide (without "-- ...", the justification is asked for)
  edit N [-- JUSTIFICATION]          propose corrected arguments (one line of JSON, asked for);
                                     the edited request needs its own decision
  history                            the latest resolutions
  rules                              remembered approvals
  revoke RULE_ID                     revoke a remembered approval
  help                               this text
  quit                               leave (also end of input)
N is the number shown in the list, or the request id.
`

// command runs one command line; it reports whether to quit.
func (r *reviewer) command(ctx context.Context, line string, lines <-chan string) (quit bool) {
	line = strings.TrimSpace(line)
	verb, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(verb) {
	case "":
	case "help", "?", "h":
		r.say("%s", reviewHelp)
	case "list", "ls", "l":
		r.printList()
	case "show", "s":
		r.show(ctx, rest)
	case "approve", "a":
		r.decide(ctx, aais.Approve, rest, lines)
	case "deny", "d":
		r.decide(ctx, aais.Deny, rest, lines)
	case "edit", "e":
		r.edit(ctx, rest, lines)
	case "history":
		r.history(ctx)
	case "rules":
		r.rules(ctx)
	case "revoke":
		r.revoke(ctx, rest)
	case "quit", "exit", "q":
		return true
	default:
		r.say("Unknown command %q; type help.\n", visible(verb))
	}
	return false
}

// lookup finds a pending request by number or id.
func (r *reviewer) lookup(ref string) (aais.Request, int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref = strings.TrimPrefix(ref, "#")
	id := ref
	if n, err := strconv.Atoi(ref); err == nil {
		var ok bool
		if id, ok = r.ids[n]; !ok {
			r.say("There is no request #%d; type list.\n", n)
			return aais.Request{}, 0, false
		}
	}
	req, ok := r.view.Get(id)
	if !ok || !r.shown[id] || r.resolved[id] != nil {
		if n, known := r.num[id]; known {
			r.say("Request #%d (%s) is no longer pending.\n", n, visible(id))
		} else {
			r.say("No pending request %q; type list.\n", visible(ref))
		}
		return aais.Request{}, 0, false
	}
	if !req.ExpiresAt.IsZero() && !time.Now().Before(req.ExpiresAt.Time()) {
		r.say("Request #%d (%s) has expired.\n", r.number(id), visible(id))
		return aais.Request{}, 0, false
	}
	return req, r.number(id), true
}

// scopeWords explains each offered choice (the web inbox's wording).
var scopeWords = map[string]string{
	"approve/once":       "Approves this one request only. The next request, even an identical one, will ask again.",
	"approve/session":    "Approves this request and remembers the approval for the rest of the agent's session: later requests of the same session that match the conditions below are approved without asking.",
	"approve/persistent": "Approves this request and creates a lasting rule: later requests that match the conditions below are approved without asking, until the rule is revoked or expires.",
	"deny/once":          "Refuses this request. The action does not run; the agent has to ask again.",
	"cancel/once":        "Withdraws this request without approving or denying it. The action does not run.",
}

// constraintWords says in words what a session or persistent choice (or
// a rule) covers.
func constraintWords(c aais.Constraints) []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	str := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return string(raw)
	}
	for _, k := range keys {
		raw := c[k]
		switch k {
		case aais.ConstraintActionName:
			out = append(out, "the action is named "+str(raw))
		case aais.ConstraintActionKind:
			out = append(out, "the action is of kind "+str(raw))
		case aais.ConstraintActionDigest:
			out = append(out, "the action is exactly this one ("+str(raw)+")")
		case aais.ConstraintResourcePrefix:
			out = append(out, "the resource starts with "+str(raw))
		case aais.ConstraintWorkingDirectoryPrefix:
			out = append(out, "the working directory is under "+str(raw))
		case aais.ConstraintCommandPrefix:
			out = append(out, "the command starts with "+string(raw)+" and has no shell metacharacters after it")
		case aais.ConstraintOriginHarness:
			out = append(out, "it comes from harness "+str(raw))
		case aais.ConstraintOriginSession:
			out = append(out, "it comes from session "+str(raw))
		case aais.ConstraintOriginProject:
			out = append(out, "it belongs to project "+str(raw))
		case aais.ConstraintExpiresAt:
			out = append(out, "until "+str(raw))
		case aais.ConstraintArgumentEquals, aais.ConstraintArgumentPrefix, aais.ConstraintArgumentGlob, aais.ConstraintArgumentRange:
			verb := map[string]string{aais.ConstraintArgumentEquals: "equals", aais.ConstraintArgumentPrefix: "starts with",
				aais.ConstraintArgumentGlob: "matches", aais.ConstraintArgumentRange: "is a number with"}[k]
			var m map[string]json.RawMessage
			if json.Unmarshal(raw, &m) != nil {
				out = append(out, k+" = "+string(raw))
				continue
			}
			ps := make([]string, 0, len(m))
			for p := range m {
				ps = append(ps, p)
			}
			sort.Strings(ps)
			for _, p := range ps {
				out = append(out, "argument "+p+" "+verb+" "+string(m[p]))
			}
		default:
			out = append(out, k+" = "+string(raw))
		}
	}
	return out
}

func (r *reviewer) permission(ctx context.Context, id string) (client.Permission, error) {
	p, err := r.c.Permission(ctx, id)
	if err != nil {
		return client.Permission{}, err
	}
	return *p, nil
}

// show prints everything the web inbox shows about one request.
func (r *reviewer) show(ctx context.Context, ref string) {
	if ref == "" {
		r.say("Usage: show N\n")
		return
	}
	req, n, ok := r.lookup(strings.Fields(ref)[0])
	if !ok {
		return
	}
	perm, permErr := r.permission(ctx, req.ID)
	a := req.Action
	var b strings.Builder
	fact := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "%-18s %s\n", name, visible(value))
		}
	}
	fmt.Fprintf(&b, "#%d %s\n", n, visible(req.ID))
	fact("Summary", a.Summary()+"  (the agent's own words: what runs is below)")
	fact("Kind", a.Kind())
	fact("Name", a.Name())
	if args := a.Arguments(); len(args) > 0 {
		pretty, err := indentJSON(args)
		if err != nil {
			pretty = args
		}
		fmt.Fprintf(&b, "Arguments\n%s\n", visibleText(string(pretty), true))
	} else {
		fact("Arguments", "(none)")
	}
	fact("Resource", a.Resource())
	fact("Working directory", a.WorkingDirectory())
	for i, e := range a.Effects() {
		name := ""
		if i == 0 {
			name = "Effects"
		}
		fmt.Fprintf(&b, "%-18s - %s\n", name, visible(e))
	}
	if p := a.Presentation(); p != nil {
		if a.Redacted() {
			fact("Redacted", "some values are redacted; bound to: "+p.BindingHint)
		}
		fact("Details", p.Details)
	}
	fact("Action digest", req.ActionDigest)
	fmt.Fprintf(&b, "%-18s %s\n", "Risk", r.risk(req.Risk.Level))
	for _, reason := range req.Risk.Reasons {
		fmt.Fprintf(&b, "%-18s - %s\n", "", visible(reason))
	}
	fact("Harness", req.Origin.Harness)
	fact("Session", req.Origin.SessionID)
	fact("Agent", req.Origin.AgentID)
	fact("Project", req.Origin.Project)
	fact("Run", req.Origin.RunID)
	profile := httpapi.RequestProfile(&req)
	if profile == "" {
		profile = "none"
	}
	fact("Compliance profile", profile)
	fact("Requested", req.CreatedAt.String())
	if req.ExpiresAt.IsZero() {
		fact("Deadline", "none")
	} else {
		fact("Deadline", req.ExpiresAt.String()+" ("+expiry(req.ExpiresAt, time.Now())+")")
	}
	b.WriteString("Choices\n")
	for _, c := range req.Choices {
		key := string(c.Decision) + "/" + string(c.Scope)
		fmt.Fprintf(&b, "  %s %s  %q\n", c.Decision, c.Scope, visible(c.Label))
		words := scopeWords[key]
		if words == "" {
			words = string(c.Decision) + ", scope " + string(c.Scope) + "."
		}
		fmt.Fprintf(&b, "      %s\n", words)
		if cons := constraintWords(c.ScopeConstraints); len(cons) > 0 {
			fmt.Fprintf(&b, "      Conditions: %s.\n", visible(strings.Join(cons, "; ")))
		}
	}
	switch {
	case permErr != nil:
		fmt.Fprintf(&b, "%-18s unknown (%v)\n", "You may decide", permErr)
	case !perm.Decide:
		fmt.Fprintf(&b, "%-18s no: %s\n", "You may decide", visible(perm.Reason))
	case !perm.Approve:
		fmt.Fprintf(&b, "%-18s deny only: %s\n", "You may decide", visible(perm.Reason))
	default:
		fmt.Fprintf(&b, "%-18s yes\n", "You may decide")
	}
	if permErr == nil && perm.JustificationRequired {
		fmt.Fprintf(&b, "%-18s required to approve (profile %s)\n", "Justification", visible(perm.Profile))
	}
	fmt.Fprintf(&b, "Decide with: approve %d [scope] [-- justification] | deny %d [-- justification]\n", n, n)
	r.say("%s", b.String())
}

// justificationRE finds the inline justification: "-- TEXT",
// "--justification TEXT" or "--justification=TEXT".
var justificationRE = regexp.MustCompile(`(?:^|\s)(?:--justification(?:=|\s+|$)|--(?:\s+|$))`)

// splitJustification separates the inline justification from the rest of
// a decision command.
func splitJustification(s string) (head, just string, given bool) {
	loc := justificationRE.FindStringIndex(s)
	if loc == nil {
		return s, "", false
	}
	just = strings.TrimSpace(s[loc[1]:])
	if len(just) >= 2 && (just[0] == '"' || just[0] == '\'') && just[len(just)-1] == just[0] {
		just = just[1 : len(just)-1]
	}
	return s[:loc[0]], strings.TrimSpace(just), true
}

// decide sends one decision on a pending request and shows the answer.
func (r *reviewer) decide(ctx context.Context, v aais.Verdict, args string, lines <-chan string) {
	head, just, given := splitJustification(args)
	f := strings.Fields(head)
	if len(f) == 0 || len(f) > 2 {
		r.say("Usage: %s N [once|session|persistent] [-- justification]\n", v)
		return
	}
	req, n, ok := r.lookup(f[0])
	if !ok {
		return
	}
	scope := aais.ScopeOnce
	if len(f) == 2 {
		scope = aais.Scope(strings.ToLower(f[1]))
	}
	if _, ok := req.Choice(v, scope); !ok {
		r.say("Request #%d does not offer (%s, %s); it offers %s.\n", n, v, scope, offered(&req))
		return
	}
	perm, err := r.permission(ctx, req.ID)
	if err != nil {
		r.say("Could not ask what you may do with #%d: %v\n", n, err)
		return
	}
	mayDecide := perm.Decide && (v != aais.Approve || perm.Approve)
	required := v == aais.Approve && perm.JustificationRequired
	// Ask for a justification only when the decision can be recorded;
	// otherwise the server's refusal says why not.
	if !given && mayDecide {
		if required {
			r.say("Justification for #%d (required by %s): ", n, visible(perm.Profile))
		} else {
			r.say("Justification for #%d (optional; Enter for none): ", n)
		}
		line, ok := nextLine(ctx, lines)
		if !ok {
			r.say("\nNothing was sent.\n")
			return
		}
		just = strings.TrimSpace(line)
		if !r.prompt {
			r.say("\n") // the answer was not echoed
		}
	}
	if required && just == "" {
		r.say("Profile %s requires a justification to approve; nothing was sent.\n", visible(perm.Profile))
		return
	}
	if c := utf8.RuneCountInString(just); c > httpapi.MaxJustification {
		r.say("The justification is %d characters long; at most %d are allowed. Nothing was sent.\n", c, httpapi.MaxJustification)
		return
	}
	m, err := r.c.Decide(ctx, &req, client.Decision{Verdict: v, Scope: scope, Justification: just})
	if errors.Is(err, client.ErrVoteRecorded) {
		r.say("Your vote on #%d is recorded: %s\nRequest #%d stays pending until enough reviewers approve it.\n",
			n, visible(m.Activity.Message), n)
		return
	}
	conflict := errors.Is(err, client.ErrConflict)
	if err == nil || conflict {
		r.resolvedHere(m)
		var out bytes.Buffer
		if conflict {
			fmt.Fprintf(&out, "Another decision resolved #%d first.\n", n)
		}
		printReceipt(&out, m)
		r.say("%s", visibleText(out.String(), true))
		r.mu.Lock()
		r.sync()
		r.mu.Unlock()
		if want := verdictOutcome(v); m.Resolution.Outcome != want && !conflict {
			r.say("The request was not %s: the outcome is %s.\n", want, r.outcome(m.Resolution.Outcome))
		}
		return
	}
	e := client.Status(err)
	if e == nil {
		r.say("The decision on #%d was not delivered: %v\n", n, err)
		return
	}
	r.say("%s\n", r.paint("31", "Refused: "+visible(e.Error())))
	if e.HTTPStatus != http.StatusNotFound {
		r.say("Request #%d stays pending.\n", n)
	}
}

// resolvedHere takes a receipt answering a decision into the view at once,
// so that the request is gone before the stream reports it too.
func (r *reviewer) resolvedHere(m *aais.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resolved[m.Resolution.RequestID] = m.Resolution
	// Applied only when it is the next event; otherwise the stream brings
	// it in order.
	_, _ = r.view.Apply(m)
}

func (r *reviewer) history(ctx context.Context) {
	resolved, err := r.c.History(ctx, 0)
	if err != nil {
		r.say("History failed: %v\n", err)
		return
	}
	if len(resolved) == 0 {
		r.say("Nothing resolved yet.\n")
		return
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOLVED\tOUTCOME\tREQUEST\tACTION\tPROFILE\tBY\tJUSTIFICATION")
	for _, e := range resolved {
		out := string(e.Outcome)
		if e.EffectiveScope != "" {
			out += " (" + string(e.EffectiveScope) + ")"
		}
		by := "-"
		switch {
		case e.Actor != nil && e.RuleID != "":
			by = e.Actor.ID + " (rule " + e.RuleID + ")"
		case e.Actor != nil:
			by = e.Actor.ID
			if e.Actor.AuthenticatedBy != "" {
				by += " (" + e.Actor.AuthenticatedBy + ")"
			}
		case e.RuleID != "":
			by = "rule " + e.RuleID
		}
		cells := []string{e.ResolvedAt, out, e.RequestID, e.ActionName, e.Profile, by, oneLine(e.Justification, 60)}
		for i, c := range cells {
			if c == "" {
				c = "-"
			}
			cells[i] = visible(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
	_, _ = r.out.Write(b.Bytes())
}

func (r *reviewer) rules(ctx context.Context) {
	rules, err := r.c.Rules(ctx)
	if err != nil {
		r.say("Rules failed: %v\n", err)
		return
	}
	if len(rules) == 0 {
		r.say("No remembered approvals.\n")
		return
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tSCOPE\tSTATE\tAPPROVED BY\tFROM REQUEST\tCOVERS")
	for _, e := range rules {
		rule := e.Rule
		state := "active"
		switch {
		case rule.Revoked():
			state = "revoked by " + rule.RevokedBy.ID
		case !e.Active:
			state = "expired"
		case !rule.ExpiresAt.IsZero():
			state = "until " + rule.ExpiresAt.Format(time.RFC3339)
		}
		fmt.Fprintln(tw, strings.Join([]string{visible(rule.ID), string(rule.Scope), visible(state), visible(rule.Actor.ID),
			visible(rule.RequestID), visible(strings.Join(constraintWords(rule.Constraints()), "; "))}, "\t"))
	}
	_ = tw.Flush()
	_, _ = r.out.Write(b.Bytes())
}

func (r *reviewer) revoke(ctx context.Context, args string) {
	f := strings.Fields(args)
	if len(f) != 1 {
		r.say("Usage: revoke RULE_ID (type rules for the ids)\n")
		return
	}
	rule, revoked, err := r.c.Revoke(ctx, f[0])
	if e := client.Status(err); e != nil {
		r.say("%s\n", r.paint("31", "Refused: "+visible(e.Error())))
		return
	}
	if err != nil {
		r.say("Revoking %s failed: %v\n", visible(f[0]), err)
		return
	}
	if !revoked {
		r.say("Rule %s was already revoked by %s at %s.\n", visible(rule.ID), visible(rule.RevokedBy.ID), rule.RevokedAt.Format(time.RFC3339))
		return
	}
	r.say("Revoked rule %s: it approves nothing more.\n", visible(rule.ID))
}

// edit proposes corrected arguments for a pending request: the server
// supersedes it with a new request carrying them, which needs its own
// decision (by someone else when the profile separates duties).
func (r *reviewer) edit(ctx context.Context, args string, lines <-chan string) {
	head, just, given := splitJustification(args)
	f := strings.Fields(head)
	if len(f) != 1 {
		r.say("Usage: edit N [-- justification]\n")
		return
	}
	req, n, ok := r.lookup(f[0])
	if !ok {
		return
	}
	r.say("Current arguments of #%d: %s\nNew arguments, one line of JSON (Enter to cancel): ", n, visible(oneLine(string(req.Action.Arguments()), 400)))
	line, ok := nextLine(ctx, lines)
	if !r.prompt {
		r.say("\n")
	}
	line = strings.TrimSpace(line)
	if !ok || line == "" {
		r.say("Nothing was sent.\n")
		return
	}
	var edited map[string]any
	if err := json.Unmarshal([]byte(line), &edited); err != nil || edited == nil {
		r.say("The arguments must be one JSON object; nothing was sent.\n")
		return
	}
	if !given {
		r.say("Justification for the edit (optional; Enter for none): ")
		if l, ok := nextLine(ctx, lines); ok {
			just = strings.TrimSpace(l)
		}
		if !r.prompt {
			r.say("\n")
		}
	}
	m, err := r.c.Edit(ctx, req.ID, json.RawMessage(line), just)
	if e := client.Status(err); e != nil {
		r.say("%s\n", r.paint("31", "Refused: "+visible(e.Error())))
		return
	}
	if err != nil {
		r.say("The edit of #%d was not delivered: %v\n", n, err)
		return
	}
	r.say("#%d is superseded by %s with the edited arguments; it needs its own decision.\n", n, visible(m.Request.ID))
}
