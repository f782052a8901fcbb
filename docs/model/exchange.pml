/*
 * exchange.pml: the exchange + approval state machine of `custos serve`
 * (the design of issue 14), for the Spin model checker.
 * docs/model/README.md says what each step stands for in the code and how
 * to run the checks; docs/model/check.sh runs them.
 *
 * Three durable stores, no transaction across them:
 *   exchange store  xst[x], owner[x], xreply[x]: every change one
 *                   compare-and-set, one winner among concurrent movers;
 *   approval store  apr[x]: absent, pending, then one resolution (first
 *                   decision wins);
 *   audit log       append-only; only the approval record is checked.
 * Two gateway instances (two replicas, or one process and its restarts),
 * each with a background thread (Recover at start, then the reconciler
 * and the resumer) and the request threads of the sender's attempts. An
 * instance can crash before any durable write (or act) of any of its
 * threads: all its threads stop, local state is lost, it restarts, runs
 * Recover, and serves again.
 *
 * Switches (spin -D...):
 *   OLD_DESIGN      the code before issue 14: no reconciler, and a retry
 *                   of a `received` exchange only answers "being
 *                   processed". Spin finds the orphan.
 *   WRITE_FAILURES  a durable write may also fail without a crash (the
 *                   store answers an error): the thread gives up its
 *                   step, the process lives on, Recover does not run.
 *   SWEEP           with WRITE_FAILURES: the reconciler also ends this
 *                   instance's own `executing` claims that no live thread
 *                   of it is running (a proposal, not the lead's design).
 *   AUDIT_FIRST     the resumer records the approval before it moves
 *                   the exchange to approved (the code before commit
 *                   5bba3f7, and OLD_DESIGN); by default it moves the
 *                   exchange first and the claimer records it.
 *   NORULES         no remembered rule approving at submission.
 *   SEPARATE        two reviewers and the deadline as three racing
 *                   processes instead of one (see Resolver).
 *   NOMONITOR       no end-state Monitor: the LTL runs check liveness
 *                   alone.
 *   MAXCRASH=n      crash budget (default 2); MAXWF=n write failures
 *                   (default 1).
 */

#ifdef OLD_DESIGN
#define AUDIT_FIRST
#endif

#ifndef MAXCRASH
#define MAXCRASH 2
#endif
#ifndef MAXWF
#define MAXWF 1
#endif

/* exchange states (gateway/exchange) */
#define X_NONE		0	/* no row */
#define X_RECEIVED	1
#define X_PENDING	2	/* pending_approval */
#define X_APPROVED	3
#define X_EXECUTING	4
#define X_DONE		5
#define X_FAILED	6
#define FINAL		(xst == X_DONE || xst == X_FAILED)

/* the approval request apr_X in the approval store (AAIS) */
#define A_ABSENT	0
#define A_PENDING	1
#define A_APPROVED	2
#define A_DENIED	3
#define A_EXPIRED	4

/* the reply stored with the exchange */
#define R_NONE		0	/* none yet: a retry gets 202 "being processed" */
#define R_PENDING	1	/* 202 pending_approval */
#define R_RESULT	2	/* the handler's result */
#define R_REFUSED	3	/* not approved: denied or expired */
#define R_UNKNOWN	4	/* ASC 6005 RESULT_STATE_UNKNOWN */
#define R_ABANDONED	5	/* the gateway failed before running anything */

/* durable state of the one exchange exc_X and its approval apr_X */
byte xst;		/* exchange state */
byte owner;		/* instance whose Claim won (ClaimedBy) */
byte xreply;		/* stored reply */
byte apr;		/* approval state */
byte audApr;		/* outcome carried by the approval audit record(s) */

/* the world, for the checks */
byte effects;		/* times the handler ran: the side effect */
bool ack;		/* the sender was answered: 202 or final */
bool approvedReceipt;	/* a reviewer got an "approved" receipt */

/* instances */
byte epoch[2];		/* incarnation: a crash increments it */
bool alive[2];		/* serving (Recover done) */
byte crashes, wfails;
#ifdef SWEEP
byte runner;		/* g+1 while a thread of instance g runs its claim */
byte runEpoch;		/* ... in this incarnation of g */
#endif

/*
 * W(body): one durable write, or an act seen outside (the side effect, a
 * reply), atomic as the store makes it, by the current incarnation e of
 * instance g. Before it, g may crash (CRASH); after a crash of g the
 * thread does nothing more (goto dead).
 */
#define LIVE	(epoch[g] == e)
#define CRASH \
	atomic { LIVE && crashes < MAXCRASH -> \
		crashes++; epoch[g]++; alive[g] = false }; \
	goto dead
#define W(body) \
	if \
	:: atomic { LIVE -> body } \
	:: CRASH \
	:: else -> goto dead \
	fi

/* WW(body): a durable write that may also fail (WRITE_FAILURES). */
#ifdef WRITE_FAILURES
#define WW(body) \
	if \
	:: atomic { LIVE -> body } \
	:: CRASH \
	:: atomic { LIVE && wfails < MAXWF -> wfails++ }; goto failed \
	:: else -> goto dead \
	fi

/* WA(body): a write of receive whose failure abandons the exchange
 * (abandon: received -> failed, "retry later"). */
#define WA(body) \
	if \
	:: atomic { LIVE -> body } \
	:: CRASH \
	:: atomic { LIVE && wfails < MAXWF -> wfails++ }; goto abandon \
	:: else -> goto dead \
	fi
#else
#define WW(body) W(body)
#define WA(body) W(body)
#endif

/* Submit apr_X (idempotent: the existing one if any); a remembered rule
 * may approve it in the same write. */
#ifdef NORULES
#define NEW_APPROVAL	apr = A_PENDING
#else
#define NEW_APPROVAL \
	if \
	:: apr = A_PENDING \
	:: apr = A_APPROVED \
	fi
#endif
#define SUBMIT \
	WW(if \
	   :: apr == A_ABSENT -> NEW_APPROVAL; ok = true \
	   :: else -> ok = false \
	   fi; \
	   a = apr)

/* Apply(from, to) with the change rep: compare-and-set. */
#define CAS(from, to, rep) \
	WW(if \
	   :: xst == from -> xst = to; rep; ok = true \
	   :: else -> ok = false \
	   fi)

/* Claim(from -> executing): one winner, recorded as this instance's. */
#ifdef SWEEP
#define RUNNING		runner = g + 1; runEpoch = e; mine = true
#define NOT_RUNNING	runner = 0; runEpoch = 0; mine = false
#else
#define RUNNING		skip
#define NOT_RUNNING	skip
#endif
#define CLAIM(from) \
	WW(if \
	   :: xst == from -> xst = X_EXECUTING; owner = g; RUNNING; ok = true \
	   :: else -> ok = false \
	   fi)

/* The approval's audit record: it carries the approval id and the
 * resolution, so a duplicate (a crash-retry) is recognisable; it never
 * records an outcome other than the approval store's. */
#define AUDIT_APPROVAL_BODY \
	assert(apr == a); \
	assert(audApr == 0 || audApr == apr); \
	audApr = apr
#define AUDIT_APPROVAL	WW(AUDIT_APPROVAL_BODY)

/* The handler runs: (a) at most once, (b) only approved, with its
 * approval recorded, and only by the claimer while its claim stands. */
#define EFFECT \
	W(assert(apr == A_APPROVED); \
	  assert(audApr == A_APPROVED); \
	  assert(xst == X_EXECUTING && owner == g); \
	  assert(effects == 0); \
	  effects++)

/* execute: after a won Claim: the handler, its audit record, the reply
 * (the audit write is merged into the last write: a crash before it and
 * a crash before the reply leave the same state). */
#define EXECUTE \
	EFFECT; \
	CAS(X_EXECUTING, X_DONE, xreply = R_RESULT; NOT_RUNNING)

/*
 * The background thread of instance g: Recover at start, then the
 * reconciler and the resumer (the approval stream and the periodic scan
 * alike: it acts whenever there is work), until a crash restarts it.
 */
proctype Gateway(byte g)
{
	byte e, s, a;
	bool ok;
#ifdef SWEEP
	bool mine;	/* this thread's claim is in the running set */
#endif
restart:
#ifdef SWEEP
	atomic { e = epoch[g]; s = 0; a = 0; ok = false; mine = false };
#else
	atomic { e = epoch[g]; s = 0; a = 0; ok = false };
#endif
	/* Recover: end this instance's own claims, "interrupted", 6005;
	 * never run again. Then serve. (A failed write here stops the
	 * process: it starts again, as after a crash.) */
	W(if
	  :: xst == X_EXECUTING && owner == g -> xst = X_FAILED; xreply = R_UNKNOWN
	  :: else
	  fi;
	  alive[g] = true);
end_loop:
	do
	:: !LIVE -> goto restart
#ifndef OLD_DESIGN
	/* reconcile: a `received` exchange (its owner may be alive) */
	:: atomic { LIVE && xst == X_RECEIVED -> s = 0 }; goto reconcile
#endif
#ifdef SWEEP
	/* a claim of this instance no live thread of it runs */
	:: atomic { LIVE && xst == X_EXECUTING && owner == g &&
		    !(runner == g + 1 && runEpoch == e) -> s = 0 }; goto sweep
#endif
	/* resume: pending_approval with its approval resolved, or approved */
	:: atomic { LIVE && (xst == X_APPROVED || (xst == X_PENDING && apr >= A_APPROVED)) ->
		    s = xst; a = apr }; goto resume
	od;

reconcile:
	/* submit the stored request, then move it on */
	SUBMIT;
	CAS(X_RECEIVED, X_PENDING, xreply = R_PENDING);
	goto next;

#ifdef SWEEP
sweep:
	CAS(X_EXECUTING, X_FAILED, xreply = R_UNKNOWN);
	goto next;
#endif

resume:
	if
	:: s == X_PENDING && a == A_APPROVED ->
#ifdef AUDIT_FIRST
		AUDIT_APPROVAL;
#endif
		/* the exchange moves first (with the decision): of the
		 * resumers that learn of the approval, the winner goes on */
		CAS(X_PENDING, X_APPROVED, skip);
		if
		:: ok
		:: else -> goto next	/* another process got there first */
		fi
	:: s == X_PENDING && (a == A_DENIED || a == A_EXPIRED) ->
		/* refuse: audit, then the refusal */
		AUDIT_APPROVAL;
		CAS(X_PENDING, X_FAILED, xreply = R_REFUSED);
		goto next
	:: s == X_APPROVED
	:: else -> goto next
	fi;
#ifndef AUDIT_FIRST
	/* approved: the approval is recorded by whoever claims the call,
	 * before the claim (a repeat if it stopped in between) */
	AUDIT_APPROVAL;
#endif
	CLAIM(X_APPROVED);
	if
	:: ok
	:: else -> goto next	/* exactly one winner */
	fi;
	EXECUTE;
next:
failed:	/* the step is over, or a write failed: a later round tries again */
#ifdef SWEEP
	atomic {
		s = 0; a = 0; ok = false;
		if	/* the thread's entry in the running set goes */
		:: mine -> NOT_RUNNING
		:: else
		fi
	};
#else
	atomic { s = 0; a = 0; ok = false };
#endif
	goto end_loop;
dead:
	goto restart
}

/*
 * One HTTP request of the sender (the first, or the same request sent
 * again), handled by a live instance: receive, or the retry path.
 */
proctype Attempt(bool first)
{
	byte g, e, a;
	bool ok;
#ifdef SWEEP
	bool mine;
#endif
end:
	/* a retry: at any time, until the exchange is final */
	first || !FINAL;
	atomic {
		if
		:: alive[0] -> g = 0
		:: alive[1] -> g = 1
		fi;
		e = epoch[g]
	};
	/* R1: create exc_X in `received` with apr_X and the AAIS request it
	 * will submit (and the idempotency record), one write; R2, its
	 * "received" audit record, is merged into R3's crash point. */
	WW(if
	   :: xst == X_NONE -> xst = X_RECEIVED; ok = true
	   :: else -> ok = false
	   fi);
	if
	:: !ok -> goto retry	/* the same (sender, message id): a retry */
	:: else
	fi;
#ifdef WRITE_FAILURES
	/* R2: the "received" audit record; if it fails, the sender is told
	 * to retry and the exchange stays received, for its retry or
	 * reconcile to move on (abandoning it raced their advance) */
	WW(skip);
#endif
	/* R3 (advance) */
	SUBMIT;
	if
	:: a == A_APPROVED && ok ->
		/* a remembered rule approved it in this very write: audit
		 * (abandon if that fails), run it as received */
		WA(AUDIT_APPROVAL_BODY);
		CLAIM(X_RECEIVED);
		if
		:: ok
		:: else -> goto retry
		fi;
		EFFECT;
		CAS(X_EXECUTING, X_DONE, xreply = R_RESULT; NOT_RUNNING; ack = true);
		goto out
	:: else
	fi;
r4:
	/* R4: pending_approval with the signed pending reply; answer 202
	 * (the answer is merged into the write: "acknowledged" is then
	 * over-approximated, which only strengthens the checks) */
	CAS(X_RECEIVED, X_PENDING, xreply = R_PENDING; ack = true);
	if
	:: ok -> goto out
	:: else
	fi;
retry:
#ifdef OLD_DESIGN
	/* the stored reply, or "being processed"; nothing moves a
	 * `received` exchange on */
	W(ack = true);
#else
	/* received: R3 + R4 itself, like the reconciler; otherwise the
	 * stored reply (202 "being processed" while there is none) */
	W(if
	  :: xst == X_RECEIVED -> ok = true
	  :: else -> ack = true; ok = false
	  fi);
	if
	:: ok -> SUBMIT; goto r4
	:: else
	fi;
#endif
#ifdef WRITE_FAILURES
	goto out;
abandon:
	/* the sender is told to retry later; nothing ran */
	CAS(X_RECEIVED, X_FAILED, xreply = R_ABANDONED);
#endif
out:
failed:	/* a write failed: a 500, not an acknowledgement */
dead:	/* the instance crashed: the connection drops, no answer */
	atomic {
#ifdef SWEEP
		if	/* the thread's entry in the running set goes */
		:: mine -> NOT_RUNNING
		:: else
		fi;
#endif
		g = 0; e = 0; a = 0; ok = false
	}
}

/*
 * The reviewers and the deadline. apr_X is resolved once: the first of
 * the two reviewers' decisions (approve or deny) and the deadline (the
 * resumer's Authority.Expire) to reach the approval store wins; the
 * others are refused (409) and change nothing. By default they are
 * folded into one process whose step is the winning resolution: the
 * refused ones add states, no behaviour. With -DSEPARATE they are three
 * processes racing (a larger state space; see README.md).
 */
#ifdef SEPARATE
proctype Decider()
{
end:
	apr != A_ABSENT;
	atomic {
		if
		:: apr == A_PENDING ->
			if
			:: apr = A_APPROVED; approvedReceipt = true
			:: apr = A_DENIED
			fi
		:: else	/* refused: already resolved */
		fi
	}
}

proctype Deadline()
{
end:
	apr != A_ABSENT;
	atomic {
		if
		:: apr == A_PENDING -> apr = A_EXPIRED
		:: else	/* already resolved */
		fi
	}
}
#else
proctype Resolver()
{
end:
	apr != A_ABSENT;
	atomic {
		if
		:: apr == A_PENDING ->
			if
			:: apr = A_APPROVED; approvedReceipt = true	/* a reviewer */
			:: apr = A_DENIED	/* a reviewer */
			:: apr = A_EXPIRED	/* the deadline */
			fi
		:: else	/* approved by a rule at submission */
		fi
	}
}
#endif

/* (c) in every end state (nothing can move any more): no orphan. */
proctype Monitor()
{
	timeout ->
	assert(xst == X_NONE || FINAL);
	/* approved: it ran, or 6005; or (a failed write) the sender was told
	 * nothing ran, and no reviewer was told "approved" */
	assert(apr != A_APPROVED || effects == 1 || xreply == R_UNKNOWN ||
	       (xreply == R_ABANDONED && !approvedReceipt));
	assert(!ack || FINAL);
	assert(!approvedReceipt || apr == A_APPROVED)
}

init {
	atomic {
		run Gateway(0);
		run Gateway(1);
		run Attempt(true);
		run Attempt(false);
#ifdef SEPARATE
		run Decider();
		run Decider();
		run Deadline();
#else
		run Resolver();
#endif
#ifndef NOMONITOR
		run Monitor()
#endif
	}
}

/* (c) liveness: every acknowledged request reaches a final state, and an
 * approval resolved approved leads to the side effect or to 6005. */
ltl answered {
	[] ((ack -> <> (xst == X_DONE || xst == X_FAILED)) &&
	    (apr == A_APPROVED -> <> (effects == 1 || xreply == R_UNKNOWN || xreply == R_ABANDONED)))
}

/* (d) first decision wins: a resolution never changes. */
ltl decided {
	[] ((apr == A_APPROVED -> [] (apr == A_APPROVED)) &&
	    (apr == A_DENIED -> [] (apr == A_DENIED)) &&
	    (apr == A_EXPIRED -> [] (apr == A_EXPIRED)))
}

/* (a), (b): never two runs, never a run without an approved resolution. */
ltl once {
	[] (effects <= 1 && (effects == 1 -> apr == A_APPROVED))
}
