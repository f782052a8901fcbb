package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/exchange"
)

// housekeeping raises the oversight timeouts of overdue reviews and purges
// expired idempotency keys.
func (g *Gateway) housekeeping(ctx context.Context) error {
	now := g.o.Now()
	overdue, err := g.o.Exchanges.Reviews(ctx, exchange.ReviewFilter{Overdue: now, NotTimedOut: true})
	if err != nil {
		return err
	}
	for _, r := range overdue {
		ok, err := g.o.Exchanges.MarkTimedOut(ctx, r.ExchangeID)
		if err != nil {
			return err
		}
		if !ok {
			continue // reviewed meanwhile, or raised by another process
		}
		x, err := g.o.Exchanges.Get(ctx, r.ExchangeID)
		if err != nil {
			return err
		}
		g.metrics.inc("custos_oversight_timeouts_total", r.Mode)
		g.o.Logger.WarnContext(ctx, "oversight_timeout: a required review is overdue", "exchange", r.ExchangeID,
			"mode", r.Mode, "profile", r.Profile, "capability", r.Capability, "sender", r.Sender, "due", r.DueAt)
		if _, err := g.o.Audit.Append(ctx, audit.OversightTimeout(g.subjectOfExchange(x, r.Profile, r.Mode), r.ExchangeID, r.DueAt)); err != nil {
			return err
		}
	}
	// A purge is a write (a commit, an fsync): once a minute is enough
	// for keys kept at least a day.
	if last := g.lastPurge.Load(); last != 0 && now.Sub(time.Unix(0, last)) < time.Minute {
		return nil
	}
	if _, err := g.o.Exchanges.PurgeIdempotency(ctx, now); err != nil {
		return err
	}
	g.lastPurge.Store(now.UnixNano())
	return nil
}

// Reviews lists the post-execution reviews (see exchange.ReviewFilter).
func (g *Gateway) Reviews(ctx context.Context, f exchange.ReviewFilter) ([]exchange.Review, error) {
	return g.o.Exchanges.Reviews(ctx, f)
}

// ErrReviewed: the review was already completed with another verdict.
var ErrReviewed = errors.New("gateway: the review is already completed")

// CompleteReview records a reviewer's verdict on an executed action, with
// an audit record naming the reviewer (from the authenticated channel).
// A retry of the same verdict is answered with the recorded review.
func (g *Gateway) CompleteReview(ctx context.Context, exchangeID string, reviewer audit.Actor, v exchange.Verdict, justification string) (exchange.Review, error) {
	r, done, err := g.o.Exchanges.CompleteReview(ctx, exchangeID, reviewer.ID, v, justification)
	if err != nil {
		return exchange.Review{}, err
	}
	if !done {
		return r, fmt.Errorf("%w (%s by %s)", ErrReviewed, r.Verdict, r.Reviewer)
	}
	x, err := g.o.Exchanges.Get(ctx, exchangeID)
	if err != nil {
		return r, err
	}
	rec := audit.Review(g.subjectOfExchange(x, r.Profile, r.Mode), exchangeID, reviewer, string(v), r.TimedOut)
	if justification != "" {
		rec.Details["justification"] = justification
	}
	// Recorded once: a retry (done again) is the same verdict; the audit
	// may then hold it twice, which says the reviewer sent it twice.
	if _, err := g.o.Audit.Append(ctx, rec); err != nil {
		return r, err
	}
	return r, nil
}

// Decision returns the signed approval_decision envelope of an exchange
// (nil while its approval is pending or when it needed none).
func (g *Gateway) Decision(ctx context.Context, exchangeID string) ([]byte, error) {
	x, err := g.o.Exchanges.Get(ctx, exchangeID)
	if err != nil {
		return nil, err
	}
	return x.Decision, nil
}

// Delivery retries: the n-th failed attempt waits 2^n seconds, at most
// ten minutes; after maxAttempts (about a day) the delivery is given up
// (the status URL still answers).
const (
	maxAttempts  = 150
	maxRetryWait = 10 * time.Minute
)

// deliver POSTs the due callback envelopes.
func (g *Gateway) deliver(ctx context.Context) error {
	due, err := g.o.Exchanges.DueDeliveries(ctx, g.o.Now(), 32)
	if err != nil {
		return err
	}
	for _, d := range due {
		failure := g.post(ctx, d)
		if failure == nil {
			g.metrics.inc("custos_callbacks_total", "delivered")
			if err := g.o.Exchanges.Delivered(ctx, d.Seq); err != nil {
				return err
			}
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		giveUp := d.Attempts+1 >= maxAttempts
		wait := min(time.Duration(1<<min(d.Attempts, 20))*time.Second, maxRetryWait)
		result := "failed"
		if giveUp {
			result = "given_up"
		}
		g.metrics.inc("custos_callbacks_total", result)
		g.o.Logger.WarnContext(ctx, "callback delivery failed", "exchange", d.ExchangeID, "url", d.URL,
			"attempt", d.Attempts+1, "retry_in", wait, "given_up", giveUp, "err", failure)
		if err := g.o.Exchanges.DeliveryFailed(ctx, d.Seq, failure.Error(), g.o.Now().Add(wait), giveUp); err != nil {
			return err
		}
	}
	return nil
}

func (g *Gateway) post(ctx context.Context, d exchange.Delivery) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Envelope))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/arsia+json; v=1")
	req.Header.Set("Custos-Exchange", d.ExchangeID)
	resp, err := g.o.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the callback answered %s", resp.Status)
	}
	return nil
}

// Review returns the post-execution review of an exchange.
func (g *Gateway) Review(ctx context.Context, exchangeID string) (exchange.Review, error) {
	return g.o.Exchanges.GetReview(ctx, exchangeID)
}
