package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/state"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/jcs"
)

// StateCapabilities are the capabilities the state handler serves, in
// the order of ARSIA-State §8.2: GET and QUERY need state.read, SET,
// DELETE, GRANT and REVOKE state.write, SNAPSHOT and PURGE their own.
func StateCapabilities() []string {
	return []string{arsia.CapStateRead, arsia.CapStateWrite, arsia.CapStateSnapshot, arsia.CapStatePurge}
}

// StateOptions configures NewState.
type StateOptions struct {
	// OperatorID is the operator_id of the ARSIA-State audit records
	// (the owner of the audit log); "" means the call's recipient (the
	// gateway's agent id).
	OperatorID string
	// Now is the operations' clock; nil means time.Now.
	Now func() time.Time
	// Registry holds the compliance profiles; nil means
	// compliance.Default().
	Registry *compliance.Registry
	// AuditRetentionDays is the least retention of the audit records, in
	// days, whatever the request's profile says; 0 means
	// DefaultStateAuditRetentionDays. A profile or entry asking for
	// longer wins.
	AuditRetentionDays int
}

// DefaultStateAuditRetentionDays is the retention of a state audit record
// when StateOptions sets none: an audit record needs a retained_until, and
// GDPR-STANDARD sets no period of its own.
const DefaultStateAuditRetentionDays = 365

// State is the built-in handler of ARSIA-State: it runs the eight state
// operations (payload.type arsiaprotocol.state/get, /set, /delete,
// /query, /snapshot, /purge, /grant, /revoke with the operation's args)
// against a state.Store for the request's sender, and answers with the
// operation's result in the same payload type: the entry (or null) for
// GET, the entry written for SET, {deleted, key}, {entries, total, limit,
// offset}, {as_of, entries, timestamp, hash}, {purged, key, purged_at},
// the grant, {revoked, grant_id}.
//
// The request's capability must be the one its operation requires
// (state.RequiredCapability; the gateway has checked the sender may call
// it): a SET under arsiaprotocol.state.read is forbidden. Failures are
// ARSIA errors with the store's code and details (conflict with
// {current_version, expected_version}, not_found, forbidden with a
// reason, invalid_request, payload_too_large), passed to the sender as
// they are (ARSIAError).
//
// The mutations (SET, DELETE, PURGE, GRANT, REVOKE) put their ARSIA-State
// audit record (state.NewAuditRecord: payload hash, never the value) in
// the execution record's details under "state_audit".
type State struct {
	st   state.Store
	opts StateOptions
}

// NewState returns the state handler on st.
func NewState(st state.Store, o StateOptions) (*State, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: state: no store", ErrConfig)
	}
	if o.AuditRetentionDays < 0 {
		return nil, fmt.Errorf("%w: state: negative audit retention", ErrConfig)
	}
	if o.OperatorID != "" && !arsia.ValidAgentID(o.OperatorID) {
		return nil, fmt.Errorf("%w: state: operator_id %q is not an agent id", ErrConfig, o.OperatorID)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AuditRetentionDays == 0 {
		o.AuditRetentionDays = DefaultStateAuditRetentionDays
	}
	return &State{st: st, opts: o}, nil
}

// Describe says which state operation the call runs. It depends on the
// payload type only.
func (h *State) Describe(c Call) (Descriptor, error) {
	op, err := state.OperationOf(c.PayloadType)
	if err != nil {
		return Descriptor{
			Kind: "arsia.state", Summary: "ARSIA-State: unknown operation",
			Effects: []string{"Refused: not a state operation"}, Risk: aais.RiskLow,
			RiskReasons: []string{"Nothing runs"},
		}, nil
	}
	d := Descriptor{Kind: "arsia.state", Summary: "ARSIA-State " + string(op) + " by " + c.From}
	switch op {
	case state.OpGet, state.OpQuery, state.OpSnapshot:
		d.Effects = []string{"Reads state entries the sender may read"}
		d.Risk, d.RiskReasons = aais.RiskLow, []string{"Read only"}
	case state.OpPurge:
		d.Effects = []string{"Erases an entry's value and its whole history (GDPR Art. 17); cannot be undone"}
		d.Risk, d.RiskReasons = aais.RiskHigh, []string{"Irreversible erasure"}
	default:
		d.Effects = []string{"Changes the sender's state entries or grants"}
		d.Risk, d.RiskReasons = aais.RiskMedium, []string{"Writes state"}
	}
	return d, nil
}

// stateFail answers e as it is.
func stateFail(e *arsia.Error) error { return NewARSIAError(e) }

// Execute runs the operation.
func (h *State) Execute(ctx context.Context, c Call) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, fail(cancelCode(ctx), refused, "state: %v", err)
	}
	op, err := state.OperationOf(c.PayloadType)
	if err != nil {
		return Result{}, stateFail(state.WireError(err))
	}
	if err := state.Authorize([]string{c.Capability}, op); err != nil {
		return Result{}, stateFail(state.WireError(err))
	}
	v, err := jcs.Decode(c.Args)
	args, ok := v.(map[string]any)
	if err != nil || !ok {
		return Result{}, stateFail(&arsia.Error{Code: arsia.CodeInvalidRequest, Description: "payload.args must be one JSON object"})
	}
	now := h.opts.Now()
	var out any
	var audit *state.AuditInput
	switch op {
	case state.OpGet:
		var a state.GetArgs
		if a, err = state.ParseGetArgs(args); err == nil {
			var e *state.Entry
			if e, err = h.st.Get(ctx, c.From, a, now); err == nil && e != nil {
				out = e.Map()
			}
		}
	case state.OpSet:
		var a state.SetArgs
		if a, err = state.ParseSetArgs(args); err == nil {
			var e *state.Entry
			if e, err = h.st.Set(ctx, c.From, a, c.Compliance, now); err == nil {
				out = e.Map()
				audit = &state.AuditInput{EventType: "state_set", Version: e.Version, PIIClassification: e.PIIClassification}
				if e.RetentionDays > 0 {
					audit.RetentionDays = e.RetentionDays
				}
			}
		}
	case state.OpDelete:
		var a state.DeleteArgs
		if a, err = state.ParseDeleteArgs(args); err == nil {
			var r *state.DeleteResult
			if r, err = h.st.Delete(ctx, c.From, a, now); err == nil {
				out = r.Map()
				audit = &state.AuditInput{EventType: "state_delete", Version: r.Version}
			}
		}
	case state.OpQuery:
		var a state.QueryArgs
		if a, err = state.ParseQueryArgs(args); err == nil {
			var r *state.QueryResult
			if r, err = h.st.Query(ctx, c.From, a, now); err == nil {
				out = r.Map()
			}
		}
	case state.OpSnapshot:
		var a state.SnapshotArgs
		if a, err = state.ParseSnapshotArgs(args); err == nil {
			var r *state.SnapshotResult
			if r, err = h.st.Snapshot(ctx, c.From, a, now); err == nil {
				out = r.Map()
			}
		}
	case state.OpPurge:
		var a state.PurgeArgs
		if a, err = state.ParsePurgeArgs(args); err == nil {
			var r *state.PurgeResult
			if r, err = h.st.Purge(ctx, c.From, a, now); err == nil {
				out = r.Map()
				if !r.AlreadyPurged {
					at, _ := arsia.ParseTimestamp(r.PurgedAt)
					audit = &state.AuditInput{EventType: "state_purge", PIIClassification: r.PIIClassification, PurgedAt: at}
				}
			}
		}
	case state.OpGrant:
		var a state.GrantArgs
		if a, err = state.ParseGrantArgs(args); err == nil {
			var g *state.Grant
			if g, err = h.st.Grant(ctx, c.From, a, now); err == nil {
				out = g.Map()
				audit = &state.AuditInput{EventType: "state_grant", GrantID: g.ID}
			}
		}
	case state.OpRevoke:
		var a state.RevokeArgs
		if a, err = state.ParseRevokeArgs(args); err == nil {
			var r *state.RevokeResult
			if r, err = h.st.Revoke(ctx, c.From, a, now); err == nil {
				out = r.Map()
				if !r.AlreadyRevoked {
					audit = &state.AuditInput{EventType: "state_revoke", GranteeAgentID: r.GranteeAgentID}
				}
			}
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return Result{}, fail(cancelCode(ctx), resultUnknown, "state: %v", err)
		}
		return Result{}, stateFail(state.WireError(err))
	}
	res := Result{PayloadType: c.PayloadType}
	if out == nil {
		res.Null = true
	} else {
		data, err := json.Marshal(out)
		if err != nil {
			return Result{}, fail(asc.InternalError, resultUnknown, "state: encoding the result: %v", err)
		}
		res.Data = data
	}
	if audit != nil {
		res.Audit = map[string]any{"state_audit": h.auditRecord(c, args, *audit, now)}
	}
	return res, nil
}

// auditRecord builds the ARSIA-State audit record of a mutation that
// happened; one the audit schema refuses (a request without compliance)
// is kept partial rather than lost.
func (h *State) auditRecord(c Call, args map[string]any, in state.AuditInput, now time.Time) map[string]any {
	env := map[string]any{
		"v": arsia.ProtocolVersion, "id": c.MessageID, "from": c.From, "to": c.To, "ts": c.Timestamp,
		"intent": "request", "capabilities": []any{c.Capability},
		"payload": map[string]any{"type": c.PayloadType, "args": args},
	}
	if c.Compliance != nil {
		env["compliance"] = c.Compliance
	}
	in.OperatorID = h.opts.OperatorID
	if in.OperatorID == "" {
		in.OperatorID = c.To
	}
	in.ProcessedAt = now
	days := h.opts.AuditRetentionDays
	if profile, _ := c.Compliance["profile"].(string); profile != "" {
		var entry *int
		if in.RetentionDays > 0 {
			entry = &in.RetentionDays
		}
		if d, err := state.EffectiveRetention(h.opts.Registry, profile, entry); err == nil && d != nil {
			days = max(days, *d)
		}
	} else if in.RetentionDays > 0 {
		days = max(days, in.RetentionDays)
	}
	in.RetentionDays = days
	rec, err := state.NewAuditRecord(env, h.opts.Registry, in)
	if err != nil {
		in.Partial = true
		if rec, err = state.NewAuditRecord(env, h.opts.Registry, in); err != nil {
			return map[string]any{"event_type": in.EventType, "error": err.Error()}
		}
	}
	return rec.Map()
}
