package asc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

func TestErrorf(t *testing.T) {
	err := Errorf(PermissionDenied, ScopeToolCall, "principal %s may not refund: %w", "svc-7", fs.ErrPermission)
	if !errors.Is(err, fs.ErrPermission) {
		t.Error("wrapped error not reachable")
	}
	var ae *Error
	if !errors.As(fmt.Errorf("handler: %w", err), &ae) || ae.Code() != PermissionDenied {
		t.Fatal("errors.As failed")
	}
	env := ae.Envelope
	if env.Status.Name != "PERMISSION_DENIED" || !env.Status.Terminal || env.Status.Severity != SeverityError {
		t.Errorf("status %+v", env.Status)
	}
	if !strings.Contains(env.Message.Developer, "svc-7") || strings.Contains(env.Message.User, "svc-7") {
		t.Errorf("message %+v", env.Message)
	}
	if err := Validate(&env); err != nil {
		t.Error(err)
	}
	if got := err.Error(); got != "asc: PERMISSION_DENIED (4002, tool_call): principal svc-7 may not refund: permission denied" {
		t.Errorf("Error() = %q", got)
	}
}

func TestErrorTerminalDefaults(t *testing.T) {
	tests := map[Code]bool{HumanApprovalRequired: false, RateLimited: true, InternalError: true, 9501: true, Running: false}
	for code, want := range tests {
		if got := Errorf(code, ScopeTask, "x").Envelope.Status.Terminal; got != want {
			t.Errorf("%d: terminal %t, want %t", code, got, want)
		}
	}
}

func TestFromError(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.7:5432: password authentication failed for user admin")
	tests := []struct {
		name string
		err  error
		code Code
	}{
		{"nil", nil, Success},
		{"plain", secret, InternalError},
		{"context", context.DeadlineExceeded, InternalError},
		{"asc", Errorf(RateLimited, ScopeToolCall, "quota"), RateLimited},
		{"wrapped asc", fmt.Errorf("outer: %w", Errorf(NotFound, ScopeTask, "no order")), NotFound},
		{"wrap", Wrap(secret, DependencyUnavailable, ScopeModelCall), DependencyUnavailable},
		{"joined", errors.Join(secret, Errorf(Conflict, ScopeStep, "v2")), Conflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := FromError(tt.err)
			if env.Status.Code != tt.code || CodeOf(tt.err) != tt.code {
				t.Fatalf("code %d, want %d", env.Status.Code, tt.code)
			}
			data, err := Marshal(&env)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), "password") {
				t.Errorf("internal error text leaked: %s", data)
			}
			if err := Validate(&env); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestFromErrorCopiesMessage(t *testing.T) {
	err := Errorf(NotFound, ScopeTask, "no order 7")
	env := FromError(err)
	env.Message.Developer = ""
	if err.Envelope.Message.Developer == "" {
		t.Fatal("FromError shares the message with the error")
	}
}

func TestWrapKeepsCauseOutOfEnvelope(t *testing.T) {
	cause := errors.New("secret detail")
	err := Wrap(cause, DependencyUnavailable, ScopeModelCall)
	if !errors.Is(err, cause) || err.Envelope.Message.Developer != "" {
		t.Fatalf("%+v", err.Envelope.Message)
	}
	if !strings.Contains(err.Error(), "secret detail") {
		t.Error("log text lacks the cause")
	}
}
