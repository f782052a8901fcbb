package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/smtp"
	"strings"
	"time"
	"unicode"
)

// EmailOptions configures an email channel.
type EmailOptions struct {
	Name string
	// Addr is the SMTP server's host:port (submission, 587, usually).
	Addr string
	// From is the envelope and header sender; To the recipients.
	From string
	To   []string
	// Username and Password, when set, authenticate with PLAIN, which
	// net/smtp sends only over TLS (or to localhost).
	Username, Password string
	// RequireTLS refuses a server that does not offer STARTTLS. Without
	// it, a server that does not is spoken to in clear text (loopback
	// relays).
	RequireTLS bool
	// TLS is the STARTTLS configuration (ServerName is Addr's host when
	// empty).
	TLS *tls.Config
	// Timeout bounds one delivery (30 s when zero).
	Timeout time.Duration
	Retry   *Retry
	// Now dates the messages (time.Now when nil).
	Now func() time.Time
}

// Email sends each notice as a plain-text email over SMTP: the summary,
// the risk, what would run, the digest and a link to the request in the
// inbox. No argument values travel by email, and nothing in it decides:
// the reviewer signs in to the inbox, where the decision goes through the
// policy like every other. A second email reports the resolution.
type Email struct {
	o    EmailOptions
	host string
}

// NewEmail returns an email channel.
func NewEmail(o EmailOptions) (*Email, error) {
	if o.Name == "" || o.Addr == "" || o.From == "" || len(o.To) == 0 {
		return nil, errors.New("notify: an email channel needs a name, a server, a sender and recipients")
	}
	host, _, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("notify: email server %q: %w", o.Addr, err)
	}
	for _, a := range append([]string{o.From}, o.To...) {
		if !mailbox(a) {
			return nil, fmt.Errorf("notify: %q is not a bare email address", a)
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Retry == nil {
		o.Retry = &Retry{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Email{o: o, host: host}, nil
}

// mailbox accepts local@domain without spaces, brackets or controls: the
// addresses go into SMTP commands and headers as they are.
func mailbox(a string) bool {
	at := strings.LastIndexByte(a, '@')
	return at > 0 && at < len(a)-1 && len(a) <= 254 &&
		!strings.ContainsFunc(a, func(r rune) bool { return r <= ' ' || r == '<' || r == '>' || r == ',' || r > '~' })
}

// Name implements Channel.
func (e *Email) Name() string { return e.o.Name }

// Announce implements Channel.
func (e *Email) Announce(ctx context.Context, n Notice) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "An agent asks for approval.\n\n")
	if n.Redacted {
		fmt.Fprintf(&b, "Details are redacted here (%s).\n", n.RedactedBecause)
		if n.BindingHint != "" {
			fmt.Fprintf(&b, "Bound to: %s\n", oneLine(n.BindingHint))
		}
	} else if n.Summary != "" {
		fmt.Fprintf(&b, "Summary (the agent's own words): %s\n", oneLine(n.Summary))
	}
	fmt.Fprintf(&b, "\nAction:   %s %s\n", oneLine(n.ActionKind), oneLine(n.ActionName))
	if len(n.ArgumentNames) > 0 {
		fmt.Fprintf(&b, "Arguments: %s (values in the inbox)\n", oneLine(strings.Join(n.ArgumentNames, ", ")))
	}
	fmt.Fprintf(&b, "Risk:     %s", n.Risk)
	if len(n.RiskReasons) > 0 {
		fmt.Fprintf(&b, " (%s)", oneLine(strings.Join(n.RiskReasons, "; ")))
	}
	fmt.Fprintf(&b, "\nAgent:    %s\n", oneLine(n.Agent))
	if n.Profile != "" {
		fmt.Fprintf(&b, "Profile:  %s\n", oneLine(n.Profile))
	}
	fmt.Fprintf(&b, "Digest:   %s\nRequest:  %s\n", n.ActionDigest, n.RequestID)
	if !n.ExpiresAt.IsZero() {
		fmt.Fprintf(&b, "Expires:  %s\n", n.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if n.InboxURL != "" {
		fmt.Fprintf(&b, "\nReview it in the inbox (sign-in required): %s\n", n.InboxURL)
	}
	b.WriteString("\nThis email cannot approve anything: decide in the inbox.\n")
	subject := fmt.Sprintf("[custos] Approval requested: %s (%s risk)", n.ActionName, n.Risk)
	return "", e.send(ctx, messageID(n.ID), "", subject, b.String())
}

// Resolve implements Channel.
func (e *Email) Resolve(ctx context.Context, _ string, n Notice, r Resolved) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Request %s (%s) was resolved: %s.\n", n.RequestID, oneLine(n.ActionName), r.Outcome)
	if r.Actor != nil {
		fmt.Fprintf(&b, "Decided by %s", oneLine(r.Actor.ID))
		if r.Actor.AuthenticatedBy != "" {
			fmt.Fprintf(&b, " (via %s)", oneLine(r.Actor.AuthenticatedBy))
		}
		fmt.Fprintf(&b, " at %s.\n", r.ResolvedAt.UTC().Format(time.RFC3339))
	}
	if r.Justification != "" {
		fmt.Fprintf(&b, "Justification: %s\n", oneLine(r.Justification))
	}
	if n.InboxURL != "" {
		fmt.Fprintf(&b, "\n%s\n", n.InboxURL)
	}
	subject := fmt.Sprintf("[custos] %s: %s", outcomeWord(r.Outcome), n.ActionName)
	return e.send(ctx, messageID(r.ID), messageID(n.ID), subject, b.String())
}

func messageID(id string) string { return "<" + id + "@custos.invalid>" }

// oneLine replaces control characters (line breaks included) by spaces:
// what the agent wrote cannot start a header or fake a paragraph.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// message is the RFC 5322 message.
func (e *Email) message(id, inReplyTo, subject, body string) ([]byte, error) {
	var m bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&m, "%s: %s\r\n", k, v) }
	h("From", e.o.From)
	h("To", strings.Join(e.o.To, ", "))
	h("Subject", mime.QEncoding.Encode("utf-8", oneLine(truncate(subject, 200))))
	h("Date", e.o.Now().Format(time.RFC1123Z))
	h("Message-ID", id)
	if inReplyTo != "" {
		h("In-Reply-To", inReplyTo)
		h("References", inReplyTo)
	}
	h("Auto-Submitted", "auto-generated")
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "quoted-printable")
	m.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&m)
	if _, err := qp.Write([]byte(strings.ReplaceAll(body, "\n", "\r\n"))); err != nil {
		return nil, err
	}
	if err := qp.Close(); err != nil {
		return nil, err
	}
	return m.Bytes(), nil
}

func (e *Email) send(ctx context.Context, id, inReplyTo, subject, body string) error {
	msg, err := e.message(id, inReplyTo, subject, body)
	if err != nil {
		return err
	}
	return e.o.Retry.do(ctx, func(ctx context.Context) error { return e.sendOnce(ctx, msg) })
}

func (e *Email) sendOnce(ctx context.Context, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, e.o.Timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", e.o.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	c, err := smtp.NewClient(conn, e.host)
	if err != nil {
		return err
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		cfg := &tls.Config{ServerName: e.host, MinVersion: tls.VersionTLS12}
		if e.o.TLS != nil {
			cfg = e.o.TLS.Clone()
			if cfg.ServerName == "" {
				cfg.ServerName = e.host
			}
		}
		if err := c.StartTLS(cfg); err != nil {
			return err
		}
	} else if e.o.RequireTLS {
		return permanent(fmt.Errorf("smtp %s does not offer STARTTLS", e.o.Addr))
	}
	if e.o.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", e.o.Username, e.o.Password, e.host)); err != nil {
			return permanent(fmt.Errorf("smtp auth: %w", err))
		}
	}
	if err := c.Mail(e.o.From); err != nil {
		return err
	}
	for _, to := range e.o.To {
		if err := c.Rcpt(to); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// FollowUp implements FollowUpChannel: a plain-text email, a reply to the
// request's announcement; like every email, it decides nothing.
func (e *Email) FollowUp(ctx context.Context, f FollowUp) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", oneLine(f.Message))
	inReplyTo, subject := "", ""
	if n := f.Request; n != nil {
		fmt.Fprintf(&b, "Action:   %s %s\nRisk:     %s\nAgent:    %s\nDigest:   %s\nRequest:  %s\n",
			oneLine(n.ActionKind), oneLine(n.ActionName), n.Risk, oneLine(n.Agent), n.ActionDigest, n.RequestID)
		if n.InboxURL != "" {
			fmt.Fprintf(&b, "\nReview it in the inbox (sign-in required): %s\n", n.InboxURL)
		}
		inReplyTo = messageID(n.ID)
		subject = fmt.Sprintf("[custos] %s: approval waiting: %s", stepWord(f.Step), n.ActionName)
	} else if r := f.Review; r != nil {
		fmt.Fprintf(&b, "Capability: %s\nSender:     %s\nProfile:    %s\nDue:        %s\nExchange:   %s\n",
			oneLine(r.Capability), oneLine(r.Sender), oneLine(r.Profile), r.DueAt.UTC().Format(time.RFC3339), r.ExchangeID)
		if r.InboxURL != "" {
			fmt.Fprintf(&b, "\n%s\n", r.InboxURL)
		}
		subject = fmt.Sprintf("[custos] %s: review overdue: %s", stepWord(f.Step), r.Capability)
	}
	b.WriteString("\nThis email cannot decide anything: decide in the inbox.\n")
	return e.send(ctx, messageID(f.ID), inReplyTo, subject, b.String())
}

func stepWord(s StepKind) string {
	if s == StepEscalation {
		return "Escalated"
	}
	return "Reminder"
}
