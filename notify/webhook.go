package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// WebhookOptions configures a webhook channel.
type WebhookOptions struct {
	Name string
	// URL receives a POST per event (https, or http to a loopback
	// address; the configuration checks it).
	URL string
	// Secret signs every delivery (Standard Webhooks).
	Secret WebhookSecret
	// Client sends the deliveries (a client with a 10 s timeout when
	// nil).
	Client *http.Client
	Retry  *Retry
	// Now is the clock of webhook-timestamp (time.Now when nil).
	Now func() time.Time
}

// Webhook posts every notice as a Standard Webhooks message: a JSON body
//
//	{"type": "approval.requested" | "approval.resolved",
//	 "timestamp": RFC 3339, "data": the Notice or {"request": the
//	 Notice, "resolution": the Resolved}}
//
// signed in the webhook-id, webhook-timestamp and webhook-signature
// headers, so that receivers can check it with any Standard Webhooks
// library. Every attempt of one delivery has the same webhook-id (the
// notice's ID): a receiver drops the duplicates by it.
type Webhook struct {
	o WebhookOptions
}

// NewWebhook returns a webhook channel.
func NewWebhook(o WebhookOptions) (*Webhook, error) {
	if o.Name == "" || o.URL == "" || len(o.Secret) == 0 {
		return nil, errors.New("notify: a webhook needs a name, a URL and a secret")
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Retry == nil {
		o.Retry = &Retry{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Webhook{o: o}, nil
}

// Name implements Channel.
func (w *Webhook) Name() string { return w.o.Name }

// WebhookEvent is the body of a webhook delivery.
type WebhookEvent struct {
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// Announce implements Channel.
func (w *Webhook) Announce(ctx context.Context, n Notice) (string, error) {
	return "", w.post(ctx, n.ID, "approval.requested", n)
}

// Resolve implements Channel.
func (w *Webhook) Resolve(ctx context.Context, _ string, n Notice, r Resolved) error {
	return w.post(ctx, r.ID, "approval.resolved", map[string]any{"request": n, "resolution": r})
}

func (w *Webhook) post(ctx context.Context, id, typ string, data any) error {
	d, err := json.Marshal(data)
	if err != nil {
		return err
	}
	body, err := json.Marshal(WebhookEvent{Type: typ, Timestamp: w.o.Now().UTC(), Data: d})
	if err != nil {
		return err
	}
	return w.o.Retry.do(ctx, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.o.URL, bytes.NewReader(body))
		if err != nil {
			return permanent(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "custos-notify")
		SignWebhook(req.Header, w.o.Secret, id, w.o.Now(), body)
		resp, err := w.o.Client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			return nil
		case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
			return fmt.Errorf("webhook %s answered %s", w.o.Name, resp.Status)
		}
		return permanent(fmt.Errorf("webhook %s refused the delivery: %s", w.o.Name, resp.Status))
	})
}

// FollowUp implements FollowUpChannel: a delivery of type
// "approval.reminder", "approval.escalation", "review.reminder" or
// "review.escalation" whose data is the FollowUp.
func (w *Webhook) FollowUp(ctx context.Context, f FollowUp) error {
	return w.post(ctx, f.ID, followUpType(f), f)
}

// followUpType is a follow-up's event type.
func followUpType(f FollowUp) string {
	if f.Review != nil {
		return "review." + string(f.Step)
	}
	return "approval." + string(f.Step)
}
