/*
 * object_allgather.pml -- SPEC 4.1, the padded object all-gather over the control
 * group (reference/src/data_plane.cpp: DataPlaneTransport::begin_all_gather_object,
 * GatherWork::wait, check_size; all_gather_object = begin + wait).  See README.md.
 *
 * Ranks 0..N-1 are the data plane (N >= 2; one rank does not communicate).  In each
 * of ROUNDS gathers every rank has one value whose metadata pickle is sz bytes
 * (1 or SMAX, nondeterministic, so ranks' sizes are equal or differ in either
 * direction; the value is the token round*N + rank + 1 -- the protocol only copies
 * values, so distinct tokens suffice).  A rank all-gathers its
 * int64 byte count, checks every announced count against MAXB (max_message_bytes)
 * before allocating, pads to the maximum, all-gathers padded bytes (an all_gather:
 * equal byte counts on every member, SPEC 9.1), and at wait() decodes the prefix of
 * each slot of the announced length, giving the values in data-plane rank order.
 *
 * An all-gather is every rank sending one message to every rank (itself included)
 * over the pair's FIFO channel ag[from * N + to], then receiving one from every rank
 * in rank order.  A message carries its kind (SIZE or BYTES) and is only received by
 * a matching receive, so two different collectives never match (they block: SPEC
 * 9.2's mismatch error, or a hang).  BYTES carries { count = the sender's pad,
 * blen = the value's bytes in it, the value }.  Decoding a slot succeeds only if
 * exactly the value's bytes are read (read_pickle refuses a truncated pickle and bytes after
 * STOP); otherwise the rank throws (O_DECODE).  A rank left waiting in a collective
 * that another rank never enters is an invalid end state (a hang).
 *
 * Macros (all optional):
 *   N         ranks (default 4)
 *   ROUNDS    gathers in sequence (default 1)
 *   SMAX      value sizes are 1 or SMAX bytes, MAXB = SMAX (default 2)
 *   OVERSIZE  a value may also be MAXB+1 bytes: every rank refuses (together)
 *   COARSE    run each rank's local steps atomically (see README.md)
 *   UNCHECKED drop the equal-count check of the byte all_gather (a real backend
 *             without checked mode): a slot holds min(count, my pad) bytes
 *   MUTANT    0 = the protocol as in SPEC 4.1 / the C++ (default)
 *             1 = a rank pads to its own size, not the agreed maximum
 *             2 = a rank checks only its own value's size against MAXB, not
 *                 every announced size (use with OVERSIZE)
 *             3 = a rank lists its own value first, not in data-plane rank order
 *             4 = a rank decodes each whole padded slot, not the announced prefix
 *             5 = the sizes are checked at wait(), after allocating (OVERSIZE)
 */
#ifndef N
#define N 4
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif
#ifndef SMAX
#define SMAX 2
#endif
#ifndef MUTANT
#define MUTANT 0
#endif
#ifdef COARSE
#define LOCAL atomic
#else
#define LOCAL
#endif

#define MAXB SMAX

#define O_RUNNING 0
#define O_DONE    1     /* every gather returned the values */
#define O_REFUSED 2     /* an announced size over MAXB: refused, nothing allocated */
#define O_DECODE  3     /* a slot did not decode: read_pickle threw */

mtype = { SIZE, BYTES };

/* [from * N + to]; capacity 2: a rank may be one collective ahead of a receiver */
chan ag[N * N] = [2] of { mtype, byte, byte, byte };

byte outcome[N];

proctype Rank(byte me) {
  byte sizes[N], got[N];
  byte q, i, sz, pad, cnt, blen, val, slot, take, round;
  bool ok;

  LOCAL {
  for (round : 0 .. ROUNDS - 1) {
    /* this round's value: its pickle is sz bytes */
#ifdef OVERSIZE
    if :: sz = 1 :: sz = SMAX :: sz = MAXB + 1 fi;
#else
    if :: sz = 1 :: sz = SMAX fi;
#endif
    /* all-gather the int64 byte counts, and wait */
    for (q : 0 .. N - 1) { ag[me * N + q]!SIZE, sz, 0, 0 };
    for (q : 0 .. N - 1) { ag[q * N + me]?SIZE, sizes[q], _, _ };
    /* check_size: every announced count, before anything is allocated */
    ok = true;
#if MUTANT != 5
    for (q : 0 .. N - 1) {
#if MUTANT == 2
      if
      :: q == me && sizes[q] > MAXB -> ok = false      /* MUTANT 2: only its own */
      :: else -> skip
      fi
#else
      if
      :: sizes[q] > MAXB -> ok = false
      :: else -> skip
      fi
#endif
    };
#endif
    if
    :: !ok -> outcome[me] = O_REFUSED; goto finished    /* throws: nothing allocated */
    :: else -> skip
    fi;
    /* pad to the maximum */
#if MUTANT == 1
    pad = sz;                                           /* MUTANT 1: its own size */
#else
    pad = 0;
    for (q : 0 .. N - 1) {
      if
      :: sizes[q] > pad -> pad = sizes[q]
      :: else -> skip
      fi
    };
#endif
    /* allocate the send buffer (pad bytes) and the receive buffer (N * pad bytes) */
    assert(pad <= MAXB);                    /* nothing over max_message_bytes is allocated */
    /* launch the byte all-gather: the value's bytes, then zeros up to pad */
    for (q : 0 .. N - 1) {
      ag[me * N + q]!BYTES, pad, (sz < pad -> sz : pad), round * N + me + 1
    };
    /* wait(): complete it, then decode each slot's prefix */
#if MUTANT == 5
    for (q : 0 .. N - 1) {                  /* MUTANT 5: the check comes this late */
      if
      :: sizes[q] > MAXB -> ok = false
      :: else -> skip
      fi
    };
#endif
    for (q : 0 .. N - 1) {
      ag[q * N + me]?BYTES, cnt, blen, val;
#ifndef UNCHECKED
      assert(cnt == pad);                   /* an all_gather: equal counts on every member */
#endif
      slot = (cnt < pad -> cnt : pad);      /* what of q's block lands in my slot */
#if MUTANT == 4
      take = pad;                           /* MUTANT 4: the whole padded slot */
#else
      take = sizes[q];                      /* the announced prefix */
#endif
      if
      :: take == blen && blen <= slot && blen == sizes[q] ->
#if MUTANT == 3
         i = (q == me -> 0 : (q < me -> q + 1 : q));  /* MUTANT 3: its own value first */
#else
         i = q;
#endif
         got[i] = val
      :: else -> ok = false                 /* truncated, or bytes after STOP */
      fi
    };
#if MUTANT == 5
    if
    :: !ok -> outcome[me] = O_REFUSED; goto finished
    :: else -> skip
    fi;
#endif
    if
    :: !ok -> outcome[me] = O_DECODE; goto finished
    :: else -> skip
    fi;
    /* every rank gets every value, in data-plane rank order */
    for (q : 0 .. N - 1) { assert(got[q] == round * N + q + 1) }
  };
  outcome[me] = O_DONE;
finished:
  skip
  }
}

init {
  byte r;
  atomic { for (r : 0 .. N - 1) { run Rank(r) } };
  (_nr_pr == 1);               /* every rank has returned or thrown */
  for (r : 1 .. N - 1) {
    assert(outcome[r] == outcome[0])             /* all return the values, or all throw */
  };
  assert(outcome[0] != O_DECODE)                 /* a correctly padded value always decodes */
}
