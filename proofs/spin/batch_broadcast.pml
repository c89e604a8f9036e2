/*
 * batch_broadcast.pml -- SPEC 6.3, the header-first model-parallel batch broadcast
 * (reference/src/model_parallel.cpp: ModelParallelTransport::broadcast and ::field;
 * reference/src/model_batch.cpp: ModelBatchLayout::header, header_status, shapes).
 * See README.md in this directory for the abstraction and the measured results.
 *
 * Ranks 0..N-1 form the host model-parallel group; rank 0 is the data constructor.
 * Every rank calls broadcast() once per step until it returns end of data or throws.
 * Per call the constructor either fails (preparing or flattening: header status -1),
 * reaches end of data (status 0) or has a batch (status 1, at most STEPS times), so a
 * failure or end of data can happen at any step.
 *
 * The spec (same on every rank, SPEC 6.1) has nf in 0..MAXF fields; each field has
 * one dim that is either fixed (1 element) or one of two dynamic symbols S0, S1 (a
 * symbol used by two fields takes one value).  The header is [status, S0, S1]; in a
 * batch each used symbol is 0 (a zero-element field, skipped), 1, or BIG (the field
 * exceeds max_message_bytes: every rank refuses it in shapes() before allocating).
 *
 * A broadcast is the root sending one message to each peer, in rank order, over that
 * peer's channel bc[p].  A message carries the root's per-group operation number and
 * the operation kind and the peer asserts both: collectives match by order and a
 * kind/size mismatch is an error (SPEC 9.2, the simulator and checked mode).  A peer
 * waiting in a broadcast the root never makes blocks forever: Spin reports an
 * invalid end state (a hang).
 *
 * Macros (all optional):
 *   N       ranks in the group, 2..4 (default 4)
 *   STEPS   batches the constructor may send before it must stop (default 2)
 *   MAXF    most fields in the spec, 0..3 (default 2)
 *   BUF     channel capacity: 0 = a broadcast is a rendezvous (default), 1 = the root
 *           may run one message ahead of each peer (an eager real backend)
 *   COARSE  run each rank's local steps atomically; atomicity is only given up where
 *           a rank blocks on a channel.  Sound here, see README.md
 *   UNCHECKED  drop the kind/sequence check: a peer takes whatever the next
 *           broadcast carries (an unchecked real backend); only the effects are caught
 *   SKEW    not a code change: the constructor's max_message_bytes is larger than
 *           its peers' (TransportOptions are per rank and never compared)
 *   MUTANT  0 = the protocol as in SPEC 6.3 / the C++ (default)
 *           1 = the constructor broadcasts the fields (payload) before the header
 *           2 = a failed constructor rethrows without broadcasting the header
 *           3 = a peer has no failure branch: it treats status -1 like a batch
 *           4 = a failed constructor announces end of data (status 0) instead of -1
 *           5 = the constructor also broadcasts zero-element fields
 */
#ifndef N
#define N 4
#endif
#ifndef STEPS
#define STEPS 2
#endif
#ifndef MAXF
#define MAXF 2
#endif
#ifndef BUF
#define BUF 0
#endif
#ifndef MUTANT
#define MUTANT 0
#endif
#ifdef COARSE
#define LOCAL atomic
#else
#define LOCAL
#endif

#define CTOR 0          /* the constructor's rank */
#define MAXB 1          /* max_message_bytes, in elements of one byte */
#ifdef SKEW
#define CTOR_MAXB BIG   /* the constructor accepts what its peers refuse */
#else
#define CTOR_MAXB MAXB
#endif
#define BIG  2          /* a symbol value that makes its field exceed MAXB */
#define SLOTS (STEPS * MAXF)

#define FIX1 0          /* field dim kinds */
#define SYM0 1
#define SYM1 2

/* how a rank's broadcast loop ended */
#define O_FAILED  1     /* status -1: the constructor rethrows, a peer raises */
#define O_EOD     2     /* status 0: end of data */
#define O_SIZE    3     /* status 1, a field over MAXB: refused before allocating */
#define O_BADHDR  4     /* a status other than -1/0/1: an error */

mtype = { HDR, FIELD };

/* root -> peer p: { operation number, kind, a, x, y }
   HDR:   a = status, x = S0, y = S1
   FIELD: a = element count, x = field index, y = content */
chan bc[N] = [BUF] of { byte, mtype, short, byte, byte };

byte nf;                     /* the spec's field count, the same on every rank */
byte dim[3];                 /* each field's dim kind */
byte outcome[N];             /* how each rank's loop ended */
byte sent[SLOTS];            /* the constructor's field content per (step, field); 0 = none */
byte got[N * SLOTS];         /* the content each rank holds per (step, field) */

inline bcast_send(kind, a, x, y) {
  for (p : 1 .. N - 1) {
    bc[p]!seq, kind, a, x, y
  };
  seq++
}

inline bcast_recv(kind, a, x, y) {
  bc[me]?rseq, rkind, a, x, y;
#ifndef UNCHECKED
  assert(rseq == seq && rkind == kind);   /* the same collective on every member */
#endif
  seq++
}

/* the element count of field f under symbol values s0, s1 */
inline count_of(f, c) {
  if
  :: dim[f] == FIX1 -> c = 1
  :: dim[f] == SYM0 -> c = s0
  :: dim[f] == SYM1 -> c = s1
  fi
}

/* layout.shapes(): every field's size is checked before anything is allocated */
inline check_shapes() {
  toobig = false;
  for (f : 0 .. MAXF - 1) {
    if
    :: f < nf ->
       count_of(f, c);
       if
       :: c > lim -> toobig = true
       :: else -> skip
       fi
    :: else -> skip
    fi
  }
}

inline send_field() {
  sent[step * MAXF + f] = step * MAXF + f + 1;
  got[me * SLOTS + step * MAXF + f] = step * MAXF + f + 1;
  bcast_send(FIELD, c, f, step * MAXF + f + 1)
}

/* a symbol used by some field takes a value in {0, 1, BIG}; an unused one stays 0 */
inline choose_symbol(k, s) {
  s = 0;
  if
  :: (nf > 0 && dim[0] == k) || (nf > 1 && dim[1] == k) || (nf > 2 && dim[2] == k) ->
     if :: s = 0 :: s = 1 :: s = BIG fi
  :: else -> skip
  fi
}

proctype Constructor() {
  byte me = CTOR, lim = CTOR_MAXB;
  byte seq = 0, step = 0, f = 0, p = 0, s0, s1;
  short status, c;
  bool toobig;

  LOCAL { do
  :: /* one call of broadcast(batch, error) */
     s0 = 0; s1 = 0;
     if
     :: status = -1                  /* an error was passed in, or flatten threw */
     :: status = 0                   /* end of data */
     :: step < STEPS -> status = 1;  /* a batch */
        choose_symbol(SYM0, s0);
        choose_symbol(SYM1, s1)
     fi;
#if MUTANT == 1
     /* MUTANT 1: the payload goes out before the header */
     if
     :: status == 1 ->
        for (f : 0 .. MAXF - 1) {
          if
          :: f < nf ->
             count_of(f, c);
             if
             :: c > 0 && c <= lim -> send_field()
             :: else -> skip
             fi
          :: else -> skip
          fi
        }
     :: else -> skip
     fi;
#endif
#if MUTANT == 2
     /* MUTANT 2: a failed constructor rethrows at once, without telling its peers */
     if
     :: status == -1 -> outcome[me] = O_FAILED; break
     :: else -> skip
     fi;
#endif
#if MUTANT == 4
     /* MUTANT 4: the failure goes out as end of data; the constructor still rethrows */
     if
     :: status == -1 -> bcast_send(HDR, 0, 0, 0); outcome[me] = O_FAILED; break
     :: else -> skip
     fi;
#endif
     bcast_send(HDR, status, s0, s1);
     if
     :: status == -1 -> outcome[me] = O_FAILED; break      /* rethrows its own error */
     :: status == 0 -> outcome[me] = O_EOD; break
     :: status == 1 ->
        check_shapes();
        if
        :: toobig -> outcome[me] = O_SIZE; break
        :: else -> skip
        fi;
#if MUTANT != 1
        for (f : 0 .. MAXF - 1) {                         /* fields in spec order */
          if
          :: f < nf ->
             count_of(f, c);
             if
#if MUTANT == 5
             :: true -> send_field()                      /* MUTANT 5: no zero skip */
#else
             :: c > 0 -> send_field()
             :: else -> skip                              /* zero elements: skipped */
#endif
             fi
          :: else -> skip
          fi
        };
#endif
        step++
     fi
  od }
}

proctype Peer(byte me) {
  byte lim = MAXB, seq = 0, rseq, step = 0, f = 0, x, y, s0, s1;
  mtype rkind;
  short status, c, count;
  bool toobig;

  LOCAL { do
  :: bcast_recv(HDR, status, s0, s1);                      /* the header comes first */
     if
     :: status == -1 ->
#if MUTANT == 3
        goto batch;                                        /* MUTANT 3: no failure branch */
#endif
        outcome[me] = O_FAILED; break                      /* "the data constructor failed ..." */
     :: status == 0 -> outcome[me] = O_EOD; break
     :: status == 1 ->
batch:  check_shapes();
        if
        :: toobig -> outcome[me] = O_SIZE; break
        :: else -> skip
        fi;
        for (f : 0 .. MAXF - 1) {
          if
          :: f < nf ->
             count_of(f, c);
             if
             :: c > 0 ->
                /* entering a field broadcast: only ever after a batch header */
                assert(status == 1);
                bcast_recv(FIELD, count, x, y);
                assert(count == c && x == f);              /* the size the header announced */
                got[me * SLOTS + step * MAXF + f] = y
             :: else -> skip                               /* zero elements: skipped */
             fi
          :: else -> skip
          fi
        };
        step++
     :: else -> outcome[me] = O_BADHDR; break              /* header_status() throws */
     fi
  od }
}

init {
  byte r, k;
  /* the spec: nf fields, each dim fixed or a symbol; SYM1 only once SYM0 is used
     (symbols are numbered by first appearance), so no spec is counted twice */
  atomic {
    if
    :: nf = 0
    :: MAXF >= 1 -> nf = 1
    :: MAXF >= 2 -> nf = 2
    :: MAXF >= 3 -> nf = 3
    fi;
    for (r : 0 .. MAXF - 1) {
      if
      :: r < nf ->
         if
         :: dim[r] = FIX1
         :: dim[r] = SYM0
         :: (r > 0 && (dim[0] == SYM0 || dim[1] == SYM0)) -> dim[r] = SYM1
         fi
      :: else -> skip
      fi
    };
    run Constructor();
    for (r : 1 .. N - 1) { run Peer(r) }
  };
  (_nr_pr == 1);               /* every rank has returned or thrown */
  for (r : 1 .. N - 1) {
    assert(outcome[r] == outcome[CTOR]);          /* every peer ends as the constructor */
    for (k : 0 .. SLOTS - 1) { assert(got[r * SLOTS + k] == sent[k]) }   /* same batches */
  }
}
