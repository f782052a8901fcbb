package filestore

import (
	"sort"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// compact applies the retention policy r at now and tidies the records:
// resolved requests keep their approval.requested envelope in
// ExtResolvedRequests (moved from "pending" or recovered from the event
// log when another library resolved them), and records of requests that
// are neither pending nor resolved any more are dropped. Pending requests
// are never removed.
func (d *document) compact(now time.Time, r Retention) CompactionReport {
	var rep CompactionReport
	changed := false

	// Tidy: every resolved request's envelope in resolvedReqs, none left
	// in pending.
	var byID map[string]*envelope
	for id := range d.resolutions {
		if _, ok := d.resolvedReqs[id]; ok {
			if _, ok := d.pending[id]; ok {
				delete(d.pending, id)
				changed = true
			}
			continue
		}
		if e, ok := d.pending[id]; ok {
			d.resolvedReqs[id] = e
			delete(d.pending, id)
			changed = true
			continue
		}
		if byID == nil {
			byID = map[string]*envelope{}
			for _, e := range d.events {
				if e.typ == aais.TypeRequested {
					byID[e.id] = e
				}
			}
		}
		if e, ok := byID[id]; ok {
			d.resolvedReqs[id] = e
			changed = true
		}
	}

	// Resolved requests: by age, then by count, oldest first.
	type res struct {
		id string
		e  *envelope
	}
	list := make([]res, 0, len(d.resolutions))
	for id, e := range d.resolutions {
		list = append(list, res{id, e})
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i].e, list[j].e
		if !a.occurredAt.Equal(b.occurredAt) {
			return a.occurredAt.Before(b.occurredAt)
		}
		if a.seq != b.seq {
			return a.seq < b.seq
		}
		return list[i].id < list[j].id
	})
	var keep []res
	if r.MaxResolvedAge >= 0 {
		cutoff := now.Add(-r.MaxResolvedAge)
		for _, x := range list {
			if x.e.timeOK && x.e.occurredAt.Before(cutoff) {
				delete(d.resolutions, x.id)
				rep.RemovedResolved++
				continue
			}
			keep = append(keep, x)
		}
	} else {
		keep = list
	}
	if r.MaxResolved >= 0 && len(keep) > r.MaxResolved {
		for _, x := range keep[:len(keep)-r.MaxResolved] {
			delete(d.resolutions, x.id)
			rep.RemovedResolved++
		}
	}

	// Records of requests no longer held.
	held := func(id string) bool {
		_, p := d.pending[id]
		_, r := d.resolutions[id]
		return p || r
	}
	for id := range d.owners {
		if !held(id) {
			delete(d.owners, id)
			rep.RemovedOwners++
			changed = true
		}
	}
	for id := range d.decisions {
		if !held(id) {
			delete(d.decisions, id)
			changed = true
		}
	}
	for _, m := range []map[string]string{d.fps, d.decisionFPs, d.byRule} {
		for id := range m {
			if !held(id) {
				delete(m, id)
				changed = true
			}
		}
	}
	for id := range d.resolvedReqs {
		if _, ok := d.resolutions[id]; !ok {
			delete(d.resolvedReqs, id)
			changed = true
		}
	}

	// The event log: by count, then by age from the head.
	n := 0
	if r.MaxEvents >= 0 && len(d.events) > r.MaxEvents {
		n = len(d.events) - r.MaxEvents
	}
	if r.MaxEventAge >= 0 {
		cutoff := now.Add(-r.MaxEventAge)
		for n < len(d.events) && d.events[n].timeOK && d.events[n].occurredAt.Before(cutoff) {
			n++
		}
	}
	for _, e := range d.events[:n] {
		if e.seq > d.compacted {
			d.compacted = e.seq
		}
	}
	if n > 0 {
		d.events = append([]*envelope(nil), d.events[n:]...)
	}
	rep.RemovedEvents = n
	rep.CompactedThrough = d.compacted
	rep.Changed = changed || rep.RemovedResolved > 0 || rep.RemovedEvents > 0
	return rep
}
