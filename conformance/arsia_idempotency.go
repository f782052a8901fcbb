package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

// execIdempotency runs the idempotency suite (Core §10): validate_key,
// scope_tuple, resolve_key, is_record_expired, compute_expiry and
// in_progress_lifecycle, the last against a MemoryIdempotencyStore.
func execIdempotency(_ *arsiaEnv, c *arsiaCase) error {
	switch op := c.operation(""); op {
	case "validate_key":
		key, ok := c.Input["key"].(string)
		if !ok {
			return fmt.Errorf("%w: input.key is not a string", errUnsupported)
		}
		return expectValidity(c, idemErrorTexts(arsia.ValidateIdempotencyKey(key)))
	case "scope_tuple":
		env, err := caseEnvelope(c)
		if err != nil {
			return err
		}
		scope, err := arsia.IdempotencyScopeOf(env)
		if res := expectValidity(c, idemErrorTexts(err)); res != nil || err != nil {
			return res
		}
		return firstErr(expectEqual(c, "from", scope.From), expectEqual(c, "to", scope.To),
			expectEqual(c, "payload_type", scope.PayloadType))
	case "resolve_key":
		env, err := caseEnvelope(c)
		if err != nil {
			return err
		}
		header := ""
		if v, present := c.Input["header_key"]; present {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("%w: input.header_key is not a string", errUnsupported)
			}
			header = s
		}
		key, src, err := arsia.ResolveIdempotencyKey(env, header)
		if done, res := expectRaises(c, err); done {
			return res
		}
		var got any
		if src != arsia.IdempotencyKeyNone {
			got = key
		}
		return expectEqual(c, "key", got)
	case "is_record_expired":
		expiresAt, ok := c.Input["expires_at"].(string)
		if !ok {
			return fmt.Errorf("%w: input.expires_at is not a string", errUnsupported)
		}
		now, err := idemCaseNow(c)
		if err != nil {
			return err
		}
		return expectEqual(c, "expired", arsia.IsIdempotencyRecordExpired(expiresAt, now))
	case "compute_expiry":
		return idemComputeExpiry(c)
	case "in_progress_lifecycle":
		return idemLifecycle(c)
	default:
		return fmt.Errorf("%w: idempotency operation %q", errUnsupported, op)
	}
}

// idemErrorTexts turns an error into the list expectValidity reads.
func idemErrorTexts(err error) []string {
	if err == nil {
		return nil
	}
	return []string{err.Error()}
}

// idemCaseNow parses input.now, the injected clock.
func idemCaseNow(c *arsiaCase) (time.Time, error) {
	s, ok := c.Input["now"].(string)
	if !ok {
		return time.Time{}, fmt.Errorf("%w: input.now is not a string", errUnsupported)
	}
	now, err := arsia.ParseTimestamp(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("input.now: %w", err)
	}
	return now, nil
}

func idemComputeExpiry(c *arsiaCase) error {
	now, err := idemCaseNow(c)
	if err != nil {
		return err
	}
	declared := ""
	if v := c.Input["envelope_expires_at"]; v != nil {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%w: input.envelope_expires_at is not a string or null", errUnsupported)
		}
		declared = s
	}
	headerOnly, _ := c.Input["header_only"].(bool)
	got, err := arsia.ComputeIdempotencyExpiry(declared, headerOnly, now)
	if done, res := expectRaises(c, err); done {
		return res
	}
	if v, present := c.Expected["min_expires_at"]; present {
		s, _ := v.(string)
		floor, err := arsia.ParseTimestamp(s)
		if err != nil {
			return fmt.Errorf("expected.min_expires_at: %w", err)
		}
		if got.Before(floor) {
			return fmt.Errorf("expires_at %s is before the floor %s", arsia.FormatTimestamp(got), s)
		}
	}
	return nil
}

// idemLifecycle claims the key of input.envelope twice in a fresh store:
// first_mark is whether the first Begin started, status_after_first the
// status it left, second_mark whether the duplicate started. A duplicate
// that does not start must also be the in-progress conflict.
func idemLifecycle(c *arsiaCase) error {
	env, err := caseEnvelope(c)
	if err != nil {
		return err
	}
	key, ok := c.Input["key"].(string)
	if !ok {
		return fmt.Errorf("%w: input.key is not a string", errUnsupported)
	}
	scope, err := arsia.IdempotencyScopeOf(env)
	if err != nil {
		return err
	}
	scope.Key = key
	fp, err := arsia.IdempotencyFingerprint(env)
	if err != nil {
		return err
	}
	ts, _ := env["ts"].(string)
	now, err := arsia.ParseTimestamp(ts)
	if err != nil {
		return fmt.Errorf("input.envelope.ts: %w", err)
	}
	store := arsia.NewMemoryIdempotencyStore(&arsia.MemoryIdempotencyStoreOptions{Now: func() time.Time { return now }})
	ctx := context.Background()
	expires := now.Add(arsia.HeaderKeyRetention)

	_, first, err := store.Begin(ctx, scope, fp, expires)
	if err != nil {
		return fmt.Errorf("first Begin: %w", err)
	}
	status, err := store.Status(ctx, scope)
	if err != nil {
		return err
	}
	_, second, dupErr := store.Begin(ctx, scope, fp, expires)
	if !second {
		var ae *arsia.Error
		if !errors.Is(dupErr, arsia.ErrIdempotencyInProgress) || !errors.As(dupErr, &ae) || ae.WireCode() != arsia.CodeConflict {
			return fmt.Errorf("duplicate in progress: got %v, want the in-progress conflict", dupErr)
		}
	}
	return firstErr(expectEqual(c, "first_mark", first), expectEqual(c, "status_after_first", string(status)),
		expectEqual(c, "second_mark", second))
}
