/*
 * payload_exchange.pml -- SPEC 5.2, the size-then-bytes payload exchange
 * (reference/src/data_plane.cpp: DataPlaneTransport::prepare_exchange (the splits),
 * begin_exchange, check_size, ExchangeWork::wait).  See README.md here.
 *
 * Ranks 0..N-1 are the data plane (N >= 2; one rank does not communicate).  At
 * construction every rank all-gathers its max_message_bytes over the control group
 * (SPEC 4, ours) and, if any differ, every rank refuses (transport_limit_mismatch).
 * In each of ROUNDS exchanges every rank has one outgoing segment per rank, its own
 * included (input_splits); it all-to-alls the split sizes over the control group and
 * waits; it votes (SPEC 5.2, ours): ok = every received size <= its limit and every
 * own outgoing segment <= its limit, and all-gathers the int32 flag over the control
 * group; if any flag is 0, nobody allocates or launches the byte exchange -- a rank
 * whose own flag is 0 raises its size error (O_REFUSED), every other rank raises
 * exchange_refused naming the refusers (O_TOLD).  Otherwise it allocates exactly the
 * sum of the received sizes, then all-to-all-v's the bytes over the payload group (the
 * local segment travels through it too) and waits.  An all-to-all / all-gather is
 * every rank sending one message to every rank over the pair's FIFO channel
 * ([from * N + to], capacity 1: a launch does not wait for the receivers), then
 * receiving one from every rank in rank order.  A control message carries its kind
 * (LIMIT, SIZES, FLAG) and is only received by a matching receive: a kind mismatch
 * blocks (SPEC 9.2's mismatch error, or a hang).  The all-to-all-v asserts that what
 * q sends me is what q announced (the simulator's send/receive count agreement, SPEC
 * 9.3).  A rank that never enters a collective leaves the others blocked: Spin
 * reports an invalid end state (a hang).
 *
 * Split sizes.  Default: the size of the segment from `me` to `q` in round r is the
 * fixed value 1 + (me*N + q + r) mod N*N -- all N*N sizes of a round are distinct, so
 * any mix-up of sizes (wrong sender, wrong round, own size taken for another's) is
 * visible (the protocol only copies, sums and compares sizes; it never branches on
 * them except for the size limit, handled by OVERSIZE and SKEW).  MAXB = N*N.
 * -DVMAX=v instead draws every split from 0..v nondeterministically (MAXB = v),
 * which includes empty segments; the state space grows as (v+1)^(N*N), so that is
 * run for N = 2 and 3 only.
 *
 * Macros (all optional):
 *   N         ranks (default 4)
 *   ROUNDS    exchanges in sequence (default 1)
 *   VMAX      draw the splits from 0..VMAX (see above)
 *   OVERSIZE  a rank may produce one segment over MAXB, for rank me+1 or for itself
 *             (then it alone refuses)
 *   SKEW      not a code change: rank N-1 is configured with max_message_bytes MAXB-1
 *             (the default sizes include a segment of exactly MAXB)
 *   NOLIMITAGREE  the limits are not all-gathered at construction (SPEC 4 before)
 *   COARSE    run each rank's local steps atomically (see README.md)
 *   FITONLY   drop the ghost "every size is known" assertions, keeping the memory
 *             safety ones (received bytes fit the allocation exactly)
 *   MUTANT    0 = the protocol as in SPEC 5.2 / the C++ (default)
 *             1 = a rank allocates its receive buffer right after launching the size
 *                 all-to-all, before waiting for it (before the sizes are known)
 *             2 = no size exchange: a rank allocates the sum of its own outgoing
 *                 splits, assuming every peer sends it what it sends them
 *             3 = a rank allocates a fixed bound (N * MAXB), not exactly the sum
 *             4 = misrouted segments: the segment meant for rank q goes (with its
 *                 size, consistently) to rank q+1 mod N
 *             5 = no vote, and a rank that refuses still sends its segments in the
 *                 byte all-to-all-v, so nobody waits on it, then throws
 *             6 = the old SPEC 5.2 / the Python original: no vote, only the receiver
 *                 checks, and a refusing rank throws alone
 *             7 = a refusing rank throws before it votes
 */
#ifndef N
#define N 4
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif
#ifndef MUTANT
#define MUTANT 0
#endif
#ifdef COARSE
#define LOCAL atomic
#else
#define LOCAL
#endif
#ifdef VMAX
#define MAXB VMAX
#else
#define MAXB (N * N)
#endif

#define O_RUNNING 0
#define O_DONE    1     /* every exchange completed */
#define O_REFUSED 2     /* this rank refused a size over its limit, nothing allocated */
#define O_TOLD    3     /* exchange_refused: another rank refused, nothing allocated */
#define O_LIMITS  4     /* transport_limit_mismatch at construction */

#ifdef SKEW
#define LIM(r) (MAXB - (r == N - 1))   /* rank N-1 is configured with a smaller limit */
#else
#define LIM(r) MAXB
#endif

mtype = { LIMIT, SIZES, FLAG };

chan ctl[N * N] = [1] of { mtype, byte };          /* control group, [from * N + to] */
chan pay[N * N] = [1] of { byte };                 /* payload group, the byte count, [from * N + to] */

byte outcome[N];
byte sentsz[2 * N * N];      /* ghost: the segment size from -> to, [(round % 2) * N * N + from * N + to]
                                (a sender is at most one round ahead of its receivers) */
byte recvd[N * N];           /* ghost: the byte count to received from `from`, [to * N + from] */

/* allocate exactly the sum of the received sizes, once every size is known */
inline allocate() {
#ifndef FITONLY
  assert(nsizes == N);
#endif
#if MUTANT == 3
  total = N * MAXB                             /* MUTANT 3: a fixed bound */
#else
  total = 0;
  for (q : 0 .. N - 1) { total = total + sin[q] }
#endif
}

/* the rank the segment for q is sent to */
#if MUTANT == 4
#define TARGET(q) t = (q + 1) % N              /* MUTANT 4: off by one */
#else
#define TARGET(q) t = q
#endif

proctype Rank(byte me) {
  byte split[N], sin[N];
  byte q, t, v, cnt, total, off, nsizes, round, lim = LIM(me), nref;
  bool ok, same;

  LOCAL {
#ifndef NOLIMITAGREE
  /* construction (SPEC 4): all-gather max_message_bytes; any difference: all refuse */
  for (q : 0 .. N - 1) { ctl[me * N + q]!LIMIT, lim };
  same = true;
  for (q : 0 .. N - 1) {
    ctl[q * N + me]?LIMIT, v;
    same = same && (v == lim)
  };
  if
  :: !same -> outcome[me] = O_LIMITS; goto finished
  :: else -> skip
  fi;
#endif
  for (round : 0 .. ROUNDS - 1) {
    /* prepare_exchange: this round's outgoing segment sizes (input_splits) */
    for (q : 0 .. N - 1) {
#ifdef VMAX
      select(v : 0 .. VMAX);
#else
      v = 1 + (me * N + q + round) % (N * N);
#endif
#ifdef OVERSIZE
      if
      :: q == (me + 1) % N || q == me -> if :: v = MAXB + 1 :: skip fi
      :: else -> skip
      fi;
#endif
      split[q] = v;
      sentsz[(round % 2) * N * N + me * N + q] = v
    };
    nsizes = 0;
#if MUTANT == 2
    /* MUTANT 2: no size exchange; assume every peer sends what it is sent */
    for (q : 0 .. N - 1) { sin[q] = split[q] };
    nsizes = N;
#else
    /* all-to-all the split sizes over the control group ... */
    for (q : 0 .. N - 1) { TARGET(q); ctl[me * N + t]!SIZES, split[q] };
#if MUTANT == 1
    allocate();                /* MUTANT 1: allocate before waiting for the sizes */
#endif
    /* ... and wait */
    for (q : 0 .. N - 1) {
      ctl[q * N + me]?SIZES, sin[q];
      nsizes++
    };
#endif
    /* the vote: every received size and every own outgoing segment against the limit */
    ok = true;
    for (q : 0 .. N - 1) {
      if
      :: sin[q] > lim -> ok = false
#if MUTANT != 6 && MUTANT != 5
      :: split[q] > lim -> ok = false          /* own outgoing segment (the cause) */
#endif
      :: else -> skip
      fi
    };
#if MUTANT == 5 || MUTANT == 6 || MUTANT == 7
    if
    :: !ok ->
#if MUTANT == 5
       for (q : 0 .. N - 1) { TARGET(q); pay[me * N + t]!split[q] };
#endif
       outcome[me] = O_REFUSED; goto finished    /* throws alone */
    :: else -> skip
    fi;
#endif
#if MUTANT != 5 && MUTANT != 6
    /* all-gather one int32 flag per rank over the control group */
    for (q : 0 .. N - 1) { ctl[me * N + q]!FLAG, ok };
    nref = 0;
    for (q : 0 .. N - 1) {
      ctl[q * N + me]?FLAG, cnt;
      if :: !cnt -> nref++ :: else -> skip fi
    };
    if
    :: !ok -> outcome[me] = O_REFUSED; goto finished        /* its own size error */
    :: ok && nref > 0 -> outcome[me] = O_TOLD; goto finished  /* exchange_refused */
    :: else -> skip
    fi;
#endif
#if MUTANT != 1
    allocate();
#endif
    /* the byte all-to-all-v over the payload group, the local segment included */
    for (q : 0 .. N - 1) { TARGET(q); pay[me * N + t]!split[q] };
    off = 0;
    for (q : 0 .. N - 1) {
      pay[q * N + me]?cnt;
      assert(cnt == sin[q]);                     /* what q sends me is what q announced */
      assert(off + cnt <= total);                /* it fits the allocation */
      off = off + cnt;
      recvd[me * N + q] = cnt
    };
    assert(off == total);                        /* the allocation is exactly filled */
    /* wait() decodes the received segments: exactly what each sender sent me */
    for (q : 0 .. N - 1) { assert(recvd[me * N + q] == sentsz[(round % 2) * N * N + q * N + me]) };
    skip
  };
  outcome[me] = O_DONE;
finished:
  skip
  }
}

init {
  byte r, k;
  atomic { for (r : 0 .. N - 1) { run Rank(r) } };
  (_nr_pr == 1);               /* every rank has returned or thrown */
  k = 0;
  for (r : 0 .. N - 1) {
    /* all complete, or nobody does; a refusal names at least one refusing rank */
    assert((outcome[r] == O_DONE) == (outcome[0] == O_DONE));
    assert(outcome[r] != O_LIMITS || outcome[0] == O_LIMITS);
    if :: outcome[r] == O_REFUSED -> k++ :: else -> skip fi
  };
  assert(k > 0 || outcome[0] == O_DONE || outcome[0] == O_LIMITS)
}
