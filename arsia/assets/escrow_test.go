package assets

import (
	"errors"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

func TestEscrowTransitionMatrix(t *testing.T) {
	allowed := map[[2]EscrowState]bool{
		{Escrowed, Released}: true,
		{Escrowed, Returned}: true,
		{Escrowed, Disputed}: true,
		{Disputed, Released}: true,
		{Disputed, Returned}: true,
	}
	states := append(EscrowStates(), "escrowed", "CANCELLED", "")
	for _, from := range states {
		for _, to := range states {
			want := allowed[[2]EscrowState{from, to}]
			if got := CanEscrowTransition(from, to); got != want {
				t.Errorf("%q -> %q = %v, want %v", from, to, got, want)
			}
			err := EscrowTransition(from, to)
			if (err == nil) != want {
				t.Errorf("EscrowTransition(%q, %q) = %v", from, to, err)
			}
			var e *Error
			if err != nil && (!errors.Is(err, ErrEscrowTransition) || !errors.As(err, &e) || e.Code != arsia.CodeConflict) {
				t.Errorf("EscrowTransition(%q, %q) error %v", from, to, err)
			}
		}
	}
	for s, terminal := range map[EscrowState]bool{Escrowed: false, Disputed: false, Released: true, Returned: true, "X": false} {
		if s.Terminal() != terminal {
			t.Errorf("%s.Terminal() = %v", s, !terminal)
		}
	}
}

func TestValidateEscrowConditions(t *testing.T) {
	cond := map[string]any{"release_condition": "Goods delivered", "release_trigger": "com.example.delivery/confirmed",
		"release_agent": "agent:acme.release", "timeout_at": "2026-04-13T11:00:00.000Z"}
	envTS := "2026-04-13T10:00:00.000Z"
	tests := []struct {
		name    string
		cond    map[string]any
		ts      string
		ok      bool
		keyword string
	}{
		{"valid", cond, envTS, true, ""},
		{"timeout before ts", with(cond, "timeout_at", "2026-04-13T09:59:59.000Z"), envTS, false, "later than envelope.ts"},
		{"timeout equal to ts", with(cond, "timeout_at", envTS), envTS, false, "later than envelope.ts"},
		{"missing ts", cond, "", false, "envelope.ts"},
		{"malformed ts", cond, "yesterday", false, "envelope.ts"},
		{"missing release_agent", with(cond, "release_agent", deleteMember), envTS, false, "release_agent"},
		{"bad trigger", with(cond, "release_trigger", "not a type"), envTS, false, "release_trigger"},
		{"unknown member", with(cond, "timeout_action", "return"), envTS, false, "timeout_action"},
		{"nil", nil, envTS, false, "object"},
	}
	for _, tt := range tests {
		wantProblems(t, tt.name, ValidateEscrowConditions(tt.cond, tt.ts), tt.ok, tt.keyword, nil)
	}
}

func TestEscrowDisputeAndCancel(t *testing.T) {
	args := map[string]any{"payment_reference": "pay-escrow-01", "dispute_reason": "Goods not delivered", "disputed_by": "agent:acme.alpha"}
	wantProblems(t, "dispute valid", ValidateEscrowDispute(args), true, "", nil)
	wantProblems(t, "dispute missing reason", ValidateEscrowDispute(with(args, "dispute_reason", deleteMember)), false, "dispute_reason", ErrSchema)
	wantProblems(t, "dispute empty reference", ValidateEscrowDispute(with(args, "payment_reference", "")), false, "payment_reference", ErrSchema)
	wantProblems(t, "dispute bad agent", ValidateEscrowDispute(with(args, "disputed_by", "alpha")), false, "agent identifier", ErrEscrow)
	wantProblems(t, "dispute reason too long", ValidateEscrowDispute(with(args, "dispute_reason", string(make([]byte, 513)))), false, "longer", ErrSchema)
	wantProblems(t, "dispute nil", ValidateEscrowDispute(nil), false, "required", ErrSchema)

	parties := []string{"agent:acme.alpha", "agent:acme.beta"}
	for _, tt := range []struct {
		name    string
		args    map[string]any
		sender  string
		parties []string
		ok      bool
	}{
		{"payer", args, "agent:acme.alpha", parties, true},
		{"payee", with(args, "disputed_by", "agent:acme.beta"), "agent:acme.beta", parties, true},
		{"outsider", with(args, "disputed_by", "agent:outsider.evil"), "agent:outsider.evil", parties, false},
		{"spoofed disputed_by", args, "agent:acme.beta", parties, false},
		{"no parties", args, "agent:acme.alpha", nil, false},
		{"invalid sender equal to invalid party", with(args, "disputed_by", "x"), "x", []string{"x"}, false},
	} {
		e := AuthorizeEscrowDispute(tt.args, tt.sender, tt.parties)
		if (e == nil) != tt.ok {
			t.Errorf("%s: AuthorizeEscrowDispute = %v", tt.name, e)
		}
		if e != nil && (e.Code != arsia.CodeForbidden || !errors.Is(e, ErrForbidden) || len(e.Details) == 0) {
			t.Errorf("%s: %+v is not a forbidden error with details", tt.name, e)
		}
	}

	cancel := map[string]any{"payment_reference": "pay-escrow-01", "cancellation_reason": "Changed my mind"}
	wantProblems(t, "cancel valid", ValidateEscrowCancel(cancel), true, "", nil)
	wantProblems(t, "cancel without reason", ValidateEscrowCancel(with(cancel, "cancellation_reason", deleteMember)), true, "", nil)
	wantProblems(t, "cancel empty reason", ValidateEscrowCancel(with(cancel, "cancellation_reason", "")), false, "cancellation_reason", ErrSchema)
	wantProblems(t, "cancel no reference", ValidateEscrowCancel(with(cancel, "payment_reference", deleteMember)), false, "payment_reference", ErrSchema)
	if e := AuthorizeEscrowCancel("agent:acme.alpha", "agent:acme.alpha"); e != nil {
		t.Errorf("from_agent cancel refused: %v", e)
	}
	for _, sender := range []string{"agent:other.agent", "", "agent:ACME.alpha"} {
		if e := AuthorizeEscrowCancel(sender, "agent:acme.alpha"); e == nil || e.Code != arsia.CodeForbidden {
			t.Errorf("cancel by %q: %v", sender, e)
		}
	}
}

func TestAuthorizeEscrowRelease(t *testing.T) {
	cond := map[string]any{"release_condition": "x", "release_trigger": "com.example.delivery/confirmed",
		"release_agent": "agent:acme.release", "timeout_at": "2026-04-14T10:00:00.000Z"}
	now := ts("2026-04-13T12:00:00Z")
	ok := EscrowRelease{Sender: "agent:acme.release", PayloadType: "com.example.delivery/confirmed", State: Escrowed, Now: now}
	tests := []struct {
		name    string
		r       EscrowRelease
		ok      bool
		keyword string
	}{
		{"valid", ok, true, ""},
		{"after dispute", func() EscrowRelease { r := ok; r.State = Disputed; return r }(), true, ""},
		{"other sender", func() EscrowRelease { r := ok; r.Sender = "agent:acme.alpha"; return r }(), false, "release_agent"},
		{"wrong trigger", func() EscrowRelease { r := ok; r.PayloadType = "com.example.other/x"; return r }(), false, "release_trigger"},
		{"already released", func() EscrowRelease { r := ok; r.State = Released; return r }(), false, "terminal"},
		{"timed out", func() EscrowRelease { r := ok; r.Now = now.Add(48 * time.Hour); return r }(), false, "timeout_at"},
		{"no clock", func() EscrowRelease { r := ok; r.Now = time.Time{}; return r }(), false, "current time"},
	}
	for _, tt := range tests {
		wantProblems(t, tt.name, AuthorizeEscrowRelease(cond, tt.r), tt.ok, tt.keyword, nil)
	}
	if errs := AuthorizeEscrowRelease(cond, EscrowRelease{Sender: "agent:acme.alpha", PayloadType: "com.example.delivery/confirmed", State: Escrowed, Now: now}); !HasCode(errs, arsia.CodeForbidden) {
		t.Errorf("release by another agent is not forbidden: %v", Join(errs))
	}
	wantProblems(t, "empty conditions", AuthorizeEscrowRelease(nil, ok), false, "release_agent", nil)
}
