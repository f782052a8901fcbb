package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/liveness"
	"github.com/custos-runtime/custos/jcs"
	"github.com/custos-runtime/custos/store"
)

// The approvals commands work directly on a store: the local operator's
// view of the AAIS authority, with the local OS user as the actor.

type approvalsEnv struct {
	storeSpec string
	data      dataDir
	asJSON    bool
	loc       store.Location
	st        store.Store
	auth      *aais.Authority
	// checks holds, per command, the check of its flags, run before the
	// store is opened: a wrong command line is exit 2 whatever the store.
	checks map[*cobra.Command]func() error
}

// check registers the flag check of cmd.
func (e *approvalsEnv) check(cmd *cobra.Command, f func() error) {
	if e.checks == nil {
		e.checks = map[*cobra.Command]func() error{}
	}
	e.checks[cmd] = f
}

// positive is the check of a duration flag that must be above zero.
func positive(name string, d *time.Duration) func() error {
	return func() error {
		if *d <= 0 {
			return usageError{fmt.Errorf("--%s %v: want a positive duration", name, *d)}
		}
		return nil
	}
}

func newApprovalsCommand() *cobra.Command {
	env := &approvalsEnv{}
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List, decide and watch AAIS approval requests in a store",
		Long: `Work directly on an approval store, as the local operator.

The store is the one custos serve keeps in its data directory.
` + dataDirHelp + `

--store (or $CUSTOS_STORE) names another store instead:
  sqlite:PATH, PATH  a SQLite database
  file:PATH, *.json  a filestore JSON state file shared by several processes
  DIR                DIR/custos.db
  postgres://...     the PostgreSQL database of gateway replicas

Only submit and stdio create a store that is not there; the other commands
refuse and say where they looked.

Decisions are made as the local OS user (actor type human,
authenticated_by "local-os-user"): whoever can open the store file can
decide, so protect it with file permissions.

On the store of a custos serve gateway that has reviewers, roles,
separation_of_duties or justification_required configured, the commands
that change anything (submit, approve, deny, cancel, revoke, sweep, stdio)
refuse: the OS user is none of the gateway's reviewers, and a decision made
here would skip its policy. Decide through the gateway instead (custos
review, the web inbox or the HTTP API). The read-only commands (list, show,
watch, rules, snapshot) work on every store.`,
		Example: `  custos approvals list
  custos approvals show apr_123
  custos approvals approve apr_123 --scope session
  custos approvals watch --data /srv/custos-data`,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.HasParent() || cmd.HasSubCommands() {
				return nil // the group itself: its help
			}
			if check := env.checks[cmd]; check != nil {
				if err := check(); err != nil {
					return err
				}
			}
			return env.open(cmd.Context(), cmd.Annotations[createsStore] != "")
		},
		PersistentPostRunE: func(*cobra.Command, []string) error { return env.close() },
	}
	cmd.PersistentFlags().StringVar(&env.storeSpec, "store", "", "another store than the data directory's: PATH, sqlite:PATH, file:PATH, DIR or postgres://... (default $CUSTOS_STORE)")
	env.data.register(cmd)
	cmd.PersistentFlags().BoolVar(&env.asJSON, "json", false, "print AAIS messages and records as JSON")
	cmd.AddCommand(
		env.submitCommand(),
		env.listCommand(),
		env.showCommand(),
		env.decideCommand(aais.Approve),
		env.decideCommand(aais.Deny),
		env.decideCommand(aais.Cancel),
		env.watchCommand(),
		env.rulesCommand(),
		env.explainCommand(),
		env.revokeCommand(),
		env.snapshotCommand(),
		env.sweepCommand(),
		env.stdioCommand(),
	)
	return cmd
}

// createsStore is the annotation of the commands that create a missing
// store (submit, stdio); the others only work on one that exists.
const createsStore = "creates-store"

// location resolves the store: --store, else --data, else $CUSTOS_STORE,
// else the data directory's rule; from says which, for messages.
func (e *approvalsEnv) location() (loc store.Location, from string, err error) {
	spec, from := e.storeSpec, "--store"
	if spec != "" && e.data.given() {
		return store.Location{}, "", usageError{errors.New("--store and --data both name the store; give one")}
	}
	if spec == "" && !e.data.given() {
		spec, from = os.Getenv("CUSTOS_STORE"), "$CUSTOS_STORE"
	}
	if spec == "" {
		path, dfrom, err := e.data.stateFile()
		if err != nil {
			return store.Location{}, "", err
		}
		return store.Location{Kind: store.KindSQLite, Path: path}, "the data directory, " + dfrom, nil
	}
	if loc, err = store.Parse(spec); err != nil {
		return store.Location{}, "", usageError{err}
	}
	return loc, from, nil
}

func (e *approvalsEnv) open(ctx context.Context, create bool) error {
	loc, from, err := e.location()
	if err != nil {
		return err
	}
	if !create {
		missing, err := missingState(loc, "approvals.db")
		if err != nil {
			return err
		}
		if missing {
			return noStateError("approval store", loc.Path, from, "--store")
		}
	}
	st, err := store.OpenApprovals(ctx, loc)
	if err != nil {
		return err
	}
	a, err := aais.NewAuthority(st, &aais.AuthorityOptions{Liveness: liveness.Check})
	if err != nil {
		_ = st.Close()
		return err
	}
	e.loc, e.st, e.auth = loc, st, a
	return nil
}

// errGatewayStore is what the commands that change a store answer on the
// store of a gateway with a reviewer policy.
var errGatewayStore = errors.New("this store belongs to a gateway with a reviewer policy")

// mayChange returns an error when this command may not change the store:
// the store of a custos serve gateway with reviewers, roles, separation of
// duties or required justifications (the marker serve records with it,
// gateway_marker.go). The local OS user is not one of the gateway's
// reviewers, so whatever it decided here would skip the policy the
// gateway enforces.
func (e *approvalsEnv) mayChange(ctx context.Context) error {
	m, ok, err := readGatewayMarker(ctx, e.loc)
	if err != nil {
		return fmt.Errorf("%w (%v); decide through the gateway as a reviewer: custos review, the web inbox or the HTTP API (docs/reviewers.md)", errGatewayStore, err)
	}
	if !ok || !m.ReviewerPolicy {
		return nil
	}
	return fmt.Errorf("%w: custos serve %s (data %s) has reviewers, roles or separation of duties configured, "+
		"and the local OS user is none of its reviewers; decide through the gateway: "+
		"CUSTOS_SERVER=%s CUSTOS_TOKEN=<your reviewer token> custos review (or the web inbox; docs/reviewers.md)",
		errGatewayStore, m.Agent, m.Data, m.PublicURL)
}

func (e *approvalsEnv) close() error {
	if e.st == nil {
		return nil
	}
	err := e.st.Close()
	e.st = nil
	return err
}

// localActor is the actor of decisions and revocations made here.
func localActor() (aais.Actor, error) {
	u, err := user.Current()
	if err != nil || u.Username == "" {
		return aais.Actor{}, fmt.Errorf("cannot tell who the local user is: %v", err)
	}
	a := aais.Actor{ID: u.Username, Type: aais.ActorHuman, AuthenticatedBy: "local-os-user"}
	if name := strings.TrimSpace(strings.Split(u.Name, ",")[0]); name != "" && name != u.Username {
		a.DisplayName = name
	}
	return a, nil
}

func (e *approvalsEnv) submitCommand() *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "submit [FILE|-]",
		Short: "Record an approval.requested message and optionally wait for its outcome",
		Long: `Record the approval.requested message in FILE (or standard input) as a pending
request. With --wait this process is recorded as its owner (if it dies, the
request is withdrawn instead of approved for nobody). A remembered rule that covers it approves
it at once. With --wait, wait until it is resolved and exit 0 only when it
was approved, so a script can run "custos approvals submit --wait req.json &&
the-action". Submitting the same message again changes nothing. The store is
created when it is not there.`,
		Annotations: map[string]string{createsStore: "yes"},
		Args:        argsUpTo(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.mayChange(cmd.Context()); err != nil {
				return err
			}
			ctx := cmd.Context()
			data, name, err := readInput(cmd, args, 1<<20)
			if err != nil {
				return err
			}
			m, err := aais.Parse(data)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if m.Type != aais.TypeRequested {
				return fmt.Errorf("%s: a %s message, want approval.requested", name, m.Type)
			}
			a := e.auth
			if wait {
				// This process waits to act on the answer: record it as
				// the owner, so that if it dies the request is withdrawn
				// rather than approved for nobody.
				owner := liveness.Current()
				if a, err = aais.NewAuthority(e.st, &aais.AuthorityOptions{Owner: &owner, Liveness: liveness.Check}); err != nil {
					return err
				}
			}
			sub, err := a.Submit(ctx, m.Request)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			receipt := sub.Receipt
			if !e.asJSON {
				state := "recorded, pending"
				switch {
				case !sub.Created:
					state = "already recorded"
				case sub.Rule != nil:
					state = "approved automatically by rule " + sub.Rule.ID
				}
				fmt.Fprintf(w, "Request %s %s (event %d).\n", m.Request.ID, state, sub.Event.Sequence)
			} else if err := printMessage(w, sub.Event); err != nil {
				return err
			}
			if receipt == nil && wait {
				wctx := ctx
				if timeout > 0 {
					var cancel context.CancelFunc
					wctx, cancel = context.WithTimeout(ctx, timeout)
					defer cancel()
				}
				if receipt, err = a.Wait(wctx, m.Request.ID, 200*time.Millisecond); err != nil {
					return fmt.Errorf("waiting for %s: %w", m.Request.ID, err)
				}
			}
			if receipt == nil {
				return nil
			}
			if err := e.print(w, receipt, printReceipt); err != nil {
				return err
			}
			if wait && receipt.Resolution.Outcome != aais.OutcomeApproved {
				return fmt.Errorf("request %s: outcome %s", m.Request.ID, receipt.Resolution.Outcome)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the outcome; exit 1 unless approved")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up waiting after this long (0: the request's own expiry or forever)")
	e.check(cmd, func() error {
		if timeout < 0 {
			return usageError{fmt.Errorf("--timeout %v: want zero or a positive duration", timeout)}
		}
		return nil
	})
	return cmd
}

func (e *approvalsEnv) listCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the pending requests (expired ones and those of stopped processes left out)",
		Args:  argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			snap, err := e.auth.Snapshot(cmd.Context())
			if err != nil {
				return err
			}
			if e.asJSON {
				return printMessage(cmd.OutOrStdout(), snap)
			}
			w := cmd.OutOrStdout()
			if len(snap.Snapshot.Pending) == 0 {
				fmt.Fprintln(w, "No pending requests.")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tRISK\tACTION\tORIGIN\tEXPIRES\tSUMMARY")
			now := time.Now()
			for _, r := range snap.Snapshot.Pending {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Risk.Level, actionName(&r), origin(r.Origin),
					expiry(r.ExpiresAt, now), oneLine(r.Action.Summary(), 60))
			}
			return tw.Flush()
		},
	}
}

func (e *approvalsEnv) showCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show REQUEST_ID",
		Short: "Show exactly what a request would run, its choices and how it ended",
		Args:  argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := e.auth.State(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if e.asJSON {
				if err := printMessage(w, st.Request.Event); err != nil {
					return err
				}
				if st.Resolution != nil {
					return printMessage(w, st.Resolution.Event)
				}
				return nil
			}
			r := st.Request.Event.Request
			fmt.Fprintf(w, "Request   %s\n", r.ID)
			fmt.Fprintf(w, "Action    %s\n", actionName(r))
			if r.Action.Summary() != "" {
				fmt.Fprintf(w, "Summary   %s\n", r.Action.Summary())
			}
			if r.Action.Resource() != "" {
				fmt.Fprintf(w, "Resource  %s\n", r.Action.Resource())
			}
			if r.Action.WorkingDirectory() != "" {
				fmt.Fprintf(w, "Directory %s\n", r.Action.WorkingDirectory())
			}
			for _, eff := range r.Action.Effects() {
				fmt.Fprintf(w, "Effect    %s\n", eff)
			}
			fmt.Fprintf(w, "Digest    %s\n", r.ActionDigest)
			fmt.Fprintf(w, "Risk      %s", r.Risk.Level)
			if len(r.Risk.Reasons) > 0 {
				fmt.Fprintf(w, " (%s)", strings.Join(r.Risk.Reasons, "; "))
			}
			fmt.Fprintln(w)
			fmt.Fprintf(w, "Origin    %s\n", origin(r.Origin))
			fmt.Fprintf(w, "Created   %s\n", r.CreatedAt)
			if !r.ExpiresAt.IsZero() {
				fmt.Fprintf(w, "Expires   %s (%s)\n", r.ExpiresAt, expiry(r.ExpiresAt, time.Now()))
			}
			if o := st.Request.Owner; o != nil {
				fmt.Fprintf(w, "Owner     pid %d on %s: %s\n", o.PID, o.HostID, e.auth.OwnerLiveness(o))
			}
			fmt.Fprintln(w, "Action JSON (exactly what is approved):")
			pretty, err := indentJSON(r.Action.Raw())
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s\n", pretty)
			fmt.Fprintln(w, "Choices:")
			for _, c := range r.Choices {
				fmt.Fprintf(w, "  %-7s %-10s %s\n", c.Decision, c.Scope, c.Label)
				if len(c.ScopeConstraints) > 0 {
					b, _ := json.Marshal(c.ScopeConstraints)
					fmt.Fprintf(w, "          covers later requests matching %s\n", b)
				}
			}
			if st.Resolution == nil {
				fmt.Fprintln(w, "State     pending")
				return nil
			}
			printReceipt(w, st.Resolution.Event)
			return nil
		},
	}
}

func (e *approvalsEnv) decideCommand(v aais.Verdict) *cobra.Command {
	var scope, digest string
	cmd := &cobra.Command{
		Use:   string(v) + " REQUEST_ID",
		Short: fmt.Sprintf("Decide %q on a pending request, as the local OS user", v),
		Long: fmt.Sprintf(`Record the decision %q on a request and print the receipt.

The decision is bound to the action digest: pass --digest with the digest
you reviewed (custos approvals show prints it) so that a request whose
action is not the one you saw is resolved as stale rather than decided.
Without --digest, the digest of the stored request is used.

Exit status 0 when the receipt's outcome is what was decided, 1 otherwise
(expired, stale, invalid, conflict).`, v),
		Args: argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.mayChange(cmd.Context()); err != nil {
				return err
			}
			ctx := cmd.Context()
			st, err := e.auth.State(ctx, args[0])
			if err != nil {
				return err
			}
			actor, err := localActor()
			if err != nil {
				return err
			}
			req := st.Request.Event.Request
			d, err := aais.NewDecision(req, aais.DecisionParams{Decision: v, Scope: aais.Scope(scope), Actor: actor, DecidedAt: time.Now()})
			if errors.Is(err, aais.ErrNotOffered) {
				return usageError{fmt.Errorf("request %s does not offer (%s, %s); it offers %s", req.ID, v, scope, offered(req))}
			}
			if err != nil {
				return err
			}
			if digest != "" {
				d.ActionDigest = digest
			}
			m, err := e.auth.Decide(ctx, d, actor, nil)
			if err != nil {
				return err
			}
			if aais.Partial(m) {
				// A vote towards a quorum: the request is still pending.
				return e.print(cmd.OutOrStdout(), m, printPartial)
			}
			if err := e.print(cmd.OutOrStdout(), m, printReceipt); err != nil {
				return err
			}
			if want := verdictOutcome(v); m.Resolution.Outcome != want {
				return fmt.Errorf("request %s: outcome %s, not %s", req.ID, m.Resolution.Outcome, want)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&scope, "scope", string(aais.ScopeOnce), "the scope decided: once, session or persistent (must be offered)")
	cmd.Flags().StringVar(&digest, "digest", "", "the action digest you reviewed (sha256:...)")
	e.check(cmd, func() error {
		if !aais.Scope(scope).Valid() {
			return usageError{fmt.Errorf("--scope %q: want once, session or persistent", scope)}
		}
		if digest != "" && !jcs.IsDigest(digest) {
			return usageError{fmt.Errorf("--digest %q: want sha256: and 64 lowercase hex digits (custos approvals show prints it)", digest)}
		}
		return nil
	})
	return cmd
}

func verdictOutcome(v aais.Verdict) aais.Outcome {
	switch v {
	case aais.Approve:
		return aais.OutcomeApproved
	case aais.Deny:
		return aais.OutcomeDenied
	}
	return aais.OutcomeCancelled
}

func offered(r *aais.Request) string {
	var s []string
	for _, c := range r.Choices {
		s = append(s, fmt.Sprintf("(%s, %s)", c.Decision, c.Scope))
	}
	return strings.Join(s, ", ")
}

func (e *approvalsEnv) watchCommand() *cobra.Command {
	var after uint64
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print the store's events as they happen (one line each, or JSON lines with --json)",
		Long: `Print every event recorded after --after (default: print the pending
requests first, then follow from the snapshot). When the store was reset or
compacted past the position, the pending set is printed again from a fresh
snapshot. Stops on interrupt.`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			err := e.auth.Follow(cmd.Context(), after, cmd.Flags().Changed("after"), interval, aais.Follower{
				Message: func(m *aais.Message) error {
					switch {
					case e.asJSON:
						return printMessage(w, m)
					case m.Type == aais.TypeSnapshot:
						fmt.Fprintf(w, "snapshot as of %d: %d pending\n", m.Snapshot.AsOfSequence, len(m.Snapshot.Pending))
						for _, r := range m.Snapshot.Pending {
							fmt.Fprintf(w, "  pending  %s  %s  %s\n", r.ID, actionName(&r), oneLine(r.Action.Summary(), 60))
						}
					default:
						fmt.Fprintln(w, eventLine(m))
					}
					return nil
				},
				Gap: func(aais.EventPage) error {
					fmt.Fprintln(cmd.ErrOrStderr(), "custos: earlier events are gone (store reset or compacted); starting from a new snapshot")
					return nil
				},
			})
			if cmd.Context().Err() != nil {
				return nil
			}
			return err
		},
	}
	cmd.Flags().Uint64Var(&after, "after", 0, "print events with a greater sequence (skips the initial snapshot)")
	cmd.Flags().DurationVar(&interval, "interval", 250*time.Millisecond, "how often to poll the store")
	e.check(cmd, positive("interval", &interval))
	return cmd
}

func eventLine(m *aais.Message) string {
	switch m.Type {
	case aais.TypeRequested:
		r := m.Request
		return fmt.Sprintf("%6d  requested  %s  %s  risk %s  %s", m.Sequence, r.ID, actionName(r), r.Risk.Level, oneLine(r.Action.Summary(), 60))
	case aais.TypeResolved:
		r := m.Resolution
		s := fmt.Sprintf("%6d  %-9s  %s", m.Sequence, r.Outcome, r.RequestID)
		if r.EffectiveScope != "" {
			s += "  scope " + string(r.EffectiveScope)
		}
		if ext := r.Extensions[aais.RuleExtension]; ext != nil {
			var x struct {
				RuleID string `json:"rule_id"`
			}
			if json.Unmarshal(ext, &x) == nil {
				s += "  by rule " + x.RuleID
			}
		}
		return s
	}
	return fmt.Sprintf("%6d  %s", m.Sequence, m.Type)
}

func (e *approvalsEnv) rulesCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "List the remembered approvals (session and persistent rules) in force",
		Args:  argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			rules, err := e.auth.Rules(cmd.Context())
			if err != nil {
				return err
			}
			now := time.Now()
			if !all {
				rules = rules.Active(now)
			}
			w := cmd.OutOrStdout()
			if e.asJSON {
				enc := json.NewEncoder(w)
				for _, r := range rules {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
				return nil
			}
			if len(rules) == 0 {
				fmt.Fprintln(w, "No rules.")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSCOPE\tSTATE\tAPPROVED BY\tFROM REQUEST\tCONSTRAINTS")
			for _, r := range rules {
				state := "active"
				switch {
				case r.Revoked():
					state = "revoked by " + r.RevokedBy.ID
				case r.Expired(now):
					state = "expired"
				case !r.ExpiresAt.IsZero():
					state = "until " + r.ExpiresAt.Format(time.RFC3339)
				}
				c, _ := json.Marshal(r.Constraints())
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Scope, state, r.Actor.ID, r.RequestID, c)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include revoked and expired rules")
	return cmd
}

func (e *approvalsEnv) explainCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "explain REQUEST_ID",
		Short: "Say which remembered approval would approve a request now, and why (or why each does not)",
		Long: `Evaluates every rule, in matching order, against the request: the first
that matches is the one that approves it; for it, every condition that held
("matched because"), for the others the first condition that failed. It
judges by the rules' own constraints and expiry; the server also holds them
to its remember policy (oversight.remember) when it matches.`,
		Args: argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := e.auth.State(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			ms, err := e.auth.ExplainRules(cmd.Context(), st.Request.Event.Request)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if e.asJSON {
				enc := json.NewEncoder(w)
				for _, m := range ms {
					if err := enc.Encode(map[string]any{"rule": m.Rule, "matched": m.Matched, "reason": m.Reason, "because": m.Because}); err != nil {
						return err
					}
				}
				return nil
			}
			if len(ms) == 0 {
				fmt.Fprintln(w, "No rules.")
				return nil
			}
			for _, m := range ms {
				if m.Matched {
					fmt.Fprintf(w, "%s  matches: approved because\n", m.Rule.ID)
					for _, b := range m.Because {
						fmt.Fprintf(w, "    - %s\n", b)
					}
					continue
				}
				fmt.Fprintf(w, "%s  does not match: %s\n", m.Rule.ID, m.Reason)
			}
			return nil
		},
	}
}

func (e *approvalsEnv) revokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke RULE_ID",
		Short: "Revoke a remembered approval: it approves nothing more",
		Args:  argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.mayChange(cmd.Context()); err != nil {
				return err
			}
			actor, err := localActor()
			if err != nil {
				return err
			}
			r, revoked, err := e.auth.RevokeRule(cmd.Context(), args[0], actor)
			if err != nil {
				return err
			}
			if e.asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			if !revoked {
				fmt.Fprintf(cmd.OutOrStdout(), "Rule %s was already revoked by %s at %s.\n", r.ID, r.RevokedBy.ID, r.RevokedAt.Format(time.RFC3339))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Revoked rule %s.\n", r.ID)
			return nil
		},
	}
}

func (e *approvalsEnv) snapshotCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot",
		Short: "Print the approval.snapshot message a reconnecting presenter starts from",
		Args:  argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			snap, err := e.auth.Snapshot(cmd.Context())
			if err != nil {
				return err
			}
			return printMessage(cmd.OutOrStdout(), snap)
		},
	}
}

func (e *approvalsEnv) sweepCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "sweep",
		Short: "Resolve overdue requests as expired and cancel those whose process stopped",
		Args:  argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.mayChange(cmd.Context()); err != nil {
				return err
			}
			ctx := cmd.Context()
			expired, err := e.auth.ExpireOverdue(ctx)
			if err != nil {
				return err
			}
			orphaned, err := e.auth.CancelOrphaned(ctx)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, m := range append(expired, orphaned...) {
				if err := e.print(w, m, printEventLine); err != nil {
					return err
				}
			}
			if !e.asJSON {
				fmt.Fprintf(w, "%d expired, %d cancelled (owner stopped).\n", len(expired), len(orphaned))
			}
			return nil
		},
	}
}

func (e *approvalsEnv) stdioCommand() *cobra.Command {
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "stdio",
		Short: "Speak AAIS as NDJSON: events out on stdout, decisions in on stdin",
		Long: `The NDJSON stdio binding of AAIS, for a presenter running this command as a
child process: one complete envelope per line.

  stdout  an approval.snapshot first, then every approval.requested and
          approval.resolved event in sequence order; the approval.resolved
          receipt answering each decision read on stdin. A receipt can appear
          twice (as the answer and as the event, with the same sequence): a
          presenter applying events by sequence ignores the second.
  stdin   approval.decided envelopes, decided as the local OS user (the
          process owner is the authenticated channel; the actor in the
          envelope is replaced).
  stderr  diagnostics only: a line that is not a valid approval.decided
          envelope is reported there and changes nothing.

When the store is reset or compacted past the position, a new snapshot is
written. The command ends when stdin is closed. The store is created when it
is not there.`,
		Annotations: map[string]string{createsStore: "yes"},
		Args:        argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.mayChange(cmd.Context()); err != nil {
				return err
			}
			actor, err := localActor()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			out := &lineWriter{w: cmd.OutOrStdout()}
			pumpErr := make(chan error, 1)
			go func() {
				pumpErr <- e.auth.Follow(ctx, 0, false, interval, aais.Follower{Message: out.message})
			}()

			sc := bufio.NewScanner(cmd.InOrStdin())
			sc.Buffer(make([]byte, 64<<10), aais.DefaultMaxSize)
			line := 0
			for sc.Scan() {
				line++
				if len(bytes.TrimSpace(sc.Bytes())) == 0 {
					continue
				}
				if err := e.decideLine(ctx, out, sc.Bytes(), actor); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "custos: stdin line %d: %v\n", line, err)
				}
			}
			cancel()
			if err := <-pumpErr; err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return sc.Err()
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", 250*time.Millisecond, "how often to poll the store for new events")
	e.check(cmd, positive("interval", &interval))
	return cmd
}

// decideLine decides one approval.decided envelope read on stdin and
// writes its receipt.
func (e *approvalsEnv) decideLine(ctx context.Context, out *lineWriter, line []byte, actor aais.Actor) error {
	m, err := aais.Parse(line)
	if err != nil {
		return err
	}
	if m.Type != aais.TypeDecided {
		return fmt.Errorf("a %s message; only approval.decided is accepted on stdin", m.Type)
	}
	receipt, err := e.auth.Decide(ctx, m.Decision, actor, nil)
	if err != nil {
		return err
	}
	return out.message(receipt)
}

// lineWriter writes whole lines from several goroutines without
// interleaving them.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) message(m *aais.Message) error {
	b, err := aais.Marshal(m)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = l.w.Write(append(b, '\n'))
	return err
}

// print writes m as a line of JSON with --json, else as human prints it.
func (e *approvalsEnv) print(w io.Writer, m *aais.Message, human func(io.Writer, *aais.Message)) error {
	if e.asJSON {
		return printMessage(w, m)
	}
	human(w, m)
	return nil
}

func printEventLine(w io.Writer, m *aais.Message) { fmt.Fprintln(w, eventLine(m)) }

// printMessage writes one AAIS message as a line of JSON.
func printMessage(w io.Writer, m *aais.Message) error {
	b, err := aais.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printPartial prints a vote counted towards a quorum.
func printPartial(w io.Writer, m *aais.Message) {
	fmt.Fprintf(w, "%s\nThe request %s is still pending.\n", m.Activity.Message, m.Activity.RequestID)
}

func printReceipt(w io.Writer, m *aais.Message) {
	r := m.Resolution
	fmt.Fprintf(w, "Outcome   %s", r.Outcome)
	if r.EffectiveScope != "" {
		fmt.Fprintf(w, " (scope %s)", r.EffectiveScope)
	}
	fmt.Fprintf(w, "\nReceipt   %s at %s, event %d\n", r.ID, r.ResolvedAt, m.Sequence)
	if r.Message != "" {
		fmt.Fprintf(w, "Message   %s\n", r.Message)
	}
}

func actionName(r *aais.Request) string {
	return r.Action.Kind() + " " + r.Action.Name()
}

func origin(o aais.Origin) string {
	s := o.Harness
	if o.SessionID != "" {
		s += " session " + o.SessionID
	}
	if o.AgentID != "" {
		s += " agent " + o.AgentID
	}
	return s
}

func expiry(t aais.Timestamp, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := t.Time().Sub(now).Round(time.Second)
	if d <= 0 {
		return "expired"
	}
	return "in " + d.String()
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func indentJSON(b []byte) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString("  ")
	err := json.Indent(&out, b, "  ", "  ")
	return out.Bytes(), err
}
