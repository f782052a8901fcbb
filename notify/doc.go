// Package notify reaches reviewers where they are: it announces pending
// approval requests on webhooks, Slack and email, reports how they were
// resolved, and takes decisions back from Slack and from signed webhook
// callbacks.
//
// # Outbound
//
// A Notifier follows the approval stream (aais.Authority.Follow; run one
// per process) and hands each new request's Notice to the channels whose
// Route covers it (profile, capability pattern, minimum risk), then each
// resolution to the channels that announced it. It saves its position in
// a state file after every event, so a restart continues where it stopped;
// delivery is at least once, and every delivery of one event carries the
// same id (a webhook's webhook-id) for receivers to drop duplicates by.
//
// A Notice never carries the values of a request its action marks as
// redacted (presentation.redacted, with its binding_hint shown instead),
// nor of one whose compliance profile involves personal data or is
// configured as redacted (Redaction): then the summary, the resource and
// the argument values are left out, and only the argument names remain.
//
// Channels: Webhook (a JSON body signed the Standard Webhooks way),
// Slack (chat.postMessage with Block Kit, chat.update on resolution) and
// Email (SMTP through net/smtp; a summary and a link, never a decision).
// Each retries with backoff (Retry).
//
// # Inbound
//
// Slack.Handler and Webhook.CallbackHandler accept decisions only when the
// channel's own mechanism authenticates them (Slack's signing secret;
// the Standard Webhooks signature), within five minutes, never twice, and
// by a channel identity mapped to a configured reviewer. The decision then
// goes through the runtime's one decision path (a Decider:
// httpapi.Decider, with the reviewers' policy), exactly like a decision
// made in the inbox. Anything else changes nothing, is answered with an
// error and is logged (at most 20 lines a minute).
//
// # Reminders, escalation and deadlines
//
// An Escalator (run one in every process; replicas may share a store)
// follows up on the pending requests and the overdue reviews that its
// Escalation and ReviewEscalation policies cover: a reminder to the
// channels that announced them, an escalation to other channels (a
// FollowUpChannel), and at a deadline an expiry or a denial by the
// runtime (aais.Authority.ResolveAtDeadline). Each step is claimed in a
// Steps store shared by every process before it is taken, and recorded
// in the audit log (kind escalation) with an AAIS activity message; the
// clock is injected.
//
// This package speaks HTTP and SMTP; it knows the approvals only through
// package aais and reads no store itself (the Escalator's Steps and
// Reviews are given to it).
package notify
