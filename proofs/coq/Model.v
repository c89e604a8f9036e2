(* A model of SPEC 7 (sequence dispatch routes) and SPEC 8.1-8.2 (dispatch execution)
   over unbounded integers (Z) and lists.  Every definition here is meant to be read
   side by side with the SPEC; README.md maps each one to its C++ counterpart.

   Conventions.
   - Ranks and peers are natural numbers (the SPEC's checks 0 <= rank < P make the
     integer rank a natural number); the API-level functions at the end of the file
     take integer ranks and sizes like the C++ and check them.
   - Lists are read with [nth i l 0]: every index used under a validity hypothesis is
     in range, so the default never matters there.
   - Arithmetic is over Z.  The C++ refuses values beyond int64 (route_overflow); on
     every input it accepts, int64 and Z arithmetic agree. *)

From Coq Require Import ZArith Lia List Bool.
Import ListNotations.
Open Scope Z_scope.

(* ------------------------------------------------------------------------- *)
(* Generic list helpers                                                       *)

Definition sumZ (l : list Z) : Z := fold_right Z.add 0 l.

(* Rows [a, b) of a list (empty when b <= a). *)
Definition slice {A : Type} (a b : Z) (l : list A) : list A :=
  firstn (Z.to_nat (b - a)) (skipn (Z.to_nat a) l).

(* The k-th piece of a buffer cut into consecutive pieces of sizes [counts]. *)
Definition chunk {A : Type} (k : nat) (counts : list Z) (buf : list A) : list A :=
  let s := sumZ (firstn k counts) in slice s (s + nth k counts 0) buf.

(* ------------------------------------------------------------------------- *)
(* SPEC 7.1: interval_route                                                   *)

Section IntervalRoute.

(* owners[p] and the interval (start_p, end_p) of peer p *)
Definition own (o : list Z) (p : nat) : Z := nth p o 0.
Definition ist (iv : list (Z * Z)) (p : nat) : Z := fst (nth p iv (0, 0)).
Definition ien (iv : list (Z * Z)) (p : nat) : Z := snd (nth p iv (0, 0)).

(* Check (a) without the rank: owners has P+1 entries, P >= 1, owners[0] = 0,
   owners non-decreasing. *)
Definition owners_ok (o : list Z) (iv : list (Z * Z)) : Prop :=
  length o = S (length iv) /\ (1 <= length iv)%nat /\ own o 0 = 0 /\
  (forall p, (p < length iv)%nat -> own o p <= own o (S p)).

(* Check (b): 0 <= start <= owners[p] <= owners[p+1] <= end <= owners[P] for every peer. *)
Definition intervals_ok (o : list Z) (iv : list (Z * Z)) : Prop :=
  forall p, (p < length iv)%nat ->
    0 <= ist iv p /\ ist iv p <= own o p /\ own o p <= own o (S p) /\
    own o (S p) <= ien iv p /\ ien iv p <= own o (length iv).

(* The checks every rank shares: (a) but the rank, and (b). *)
Definition shared_ok (o : list Z) (iv : list (Z * Z)) : Prop :=
  owners_ok o iv /\ intervals_ok o iv.

(* All of (a), (b), (c) for one rank and its local_length. *)
Definition route_valid (L : Z) (rank : nat) (o : list Z) (iv : list (Z * Z)) : Prop :=
  owners_ok o iv /\ (rank < length iv)%nat /\ intervals_ok o iv /\
  own o (S rank) - own o rank = L.

(* send[p] computed by rank r, its offset, and recv[p] computed by rank r. *)
Definition send_count (o : list Z) (iv : list (Z * Z)) (r p : nat) : Z :=
  if Nat.eqb p r then 0
  else Z.max 0 (Z.min (own o (S r)) (ien iv p) - Z.max (own o r) (ist iv p)).

Definition send_offset (o : list Z) (iv : list (Z * Z)) (r p : nat) : Z :=
  if Nat.eqb p r then 0
  else if 0 <? send_count o iv r p then Z.max (own o r) (ist iv p) - own o r else 0.

Definition recv_count (o : list Z) (iv : list (Z * Z)) (r p : nat) : Z :=
  if Nat.eqb p r then 0
  else Z.max 0 (Z.min (own o (S p)) (ien iv r) - Z.max (own o p) (ist iv r)).

(* true iff some interval differs from its owner shard *)
Definition needs_exchange (o : list Z) (iv : list (Z * Z)) : bool :=
  existsb (fun p => negb ((ist iv p =? own o p) && (ien iv p =? own o (S p))))
          (seq 0 (length iv)).

End IntervalRoute.

(* The fields of hpref::Route. *)
Record route := mk_route {
  local_length : Z;
  global_start : Z;
  global_end : Z;
  local_output_start : Z;
  send_offsets : list Z;   (* per peer *)
  input_splits : list Z;   (* per peer: rows sent *)
  output_splits : list Z;  (* per peer: rows received *)
  route_needs_exchange : bool
}.

(* The route of [rank] once every check passed (routes.cpp: build). *)
Definition build (o : list Z) (iv : list (Z * Z)) (rank : nat) : route :=
  let P := length iv in
  {| local_length := own o (S rank) - own o rank;
     global_start := ist iv rank;
     global_end := ien iv rank;
     local_output_start := own o rank - ist iv rank;
     send_offsets := map (send_offset o iv rank) (seq 0 P);
     input_splits := map (send_count o iv rank) (seq 0 P);
     output_splits := map (recv_count o iv rank) (seq 0 P);
     route_needs_exchange := needs_exchange o iv |}.

(* ------------------------------------------------------------------------- *)
(* API level: the checks as booleans, and interval_route returning None where the
   C++ throws.                                                                *)

Definition default_owners (L : Z) (P : nat) : list Z :=
  map (fun p => Z.of_nat p * L) (seq 0 (S P)).

Definition check_shared (o : list Z) (iv : list (Z * Z)) : bool :=
  Nat.eqb (length o) (S (length iv)) && negb (Nat.eqb (length iv) 0) && (own o 0 =? 0) &&
  forallb (fun p => own o p <=? own o (S p)) (seq 0 (length iv)) &&
  forallb (fun p => (0 <=? ist iv p) && (ist iv p <=? own o p) && (own o p <=? own o (S p)) &&
                    (own o (S p) <=? ien iv p) && (ien iv p <=? own o (length iv)))
          (seq 0 (length iv)).

Definition owners_of (L : Z) (iv : list (Z * Z)) (oo : option (list Z)) : list Z :=
  match oo with Some o => o | None => default_owners L (length iv) end.

Definition interval_route (L rank : Z) (iv : list (Z * Z)) (oo : option (list Z))
  : option route :=
  let o := owners_of L iv oo in
  if check_shared o iv && (0 <=? rank) && (rank <? Z.of_nat (length iv)) &&
     (own o (S (Z.to_nat rank)) - own o (Z.to_nat rank) =? L)
  then Some (build o iv (Z.to_nat rank)) else None.

(* ------------------------------------------------------------------------- *)
(* SPEC 7.2: sliding-window intervals                                         *)

(* The largest i < n with f i (0 if none). *)
Fixpoint find_last (f : nat -> bool) (n : nat) : nat :=
  match n with
  | O => O
  | S m => if f m then m else find_last f m
  end.

(* Index of the largest boundary <= x; for 0 <= x < b.back() it is doc(x), the document
   holding raw token x. *)
Definition doc_index (b : list Z) (x : Z) : nat :=
  find_last (fun i => nth i b 0 <=? x) (length b).

(* doc_start(x): the largest boundary <= x. *)
Definition doc_start (b : list Z) (x : Z) : Z := nth (doc_index b x) b 0.

(* Check (b) of 7.2 / 7.4: at least 2 entries, starts at 0, ends at L * size,
   strictly increasing. *)
Definition boundaries_ok (b : list Z) (L : Z) (size : nat) : Prop :=
  (2 <= length b)%nat /\ nth 0 b 0 = 0 /\ last b 0 = L * Z.of_nat size /\
  (forall i, (S i < length b)%nat -> nth i b 0 < nth (S i) b 0).

(* Peer p's interval (max(doc_start(p L), p L - window + 1), (p+1) L). *)
Definition window_intervals (b : list Z) (L : Z) (size : nat) (w : Z) : list (Z * Z) :=
  map (fun p => (Z.max (doc_start b (Z.of_nat p * L)) (Z.of_nat p * L - w + 1),
                 (Z.of_nat p + 1) * L))
      (seq 0 size).

(* ------------------------------------------------------------------------- *)
(* SPEC 7.3: compressed document offsets                                      *)

(* Document d has floor((b_{d+1} - b_d) / r) complete blocks. *)
Definition block_count (b : list Z) (r : Z) (d : nat) : Z :=
  (nth (S d) b 0 - nth d b 0) / r.

(* acc, acc + c0, acc + c0 + c1, ...  (one more entry than the list) *)
Fixpoint psums (acc : Z) (l : list Z) : list Z :=
  match l with
  | [] => [acc]
  | c :: t => acc :: psums (acc + c) t
  end.

(* Prefix sums of block counts: D+1 entries from 0. *)
Definition compressed_document_offsets (b : list Z) (r : Z) : list Z :=
  psums 0 (map (block_count b r) (seq 0 (pred (length b)))).

(* The last raw token of every complete block: block j of document d covers raw
   [b_d + j r, b_d + (j+1) r). *)
Definition block_last_tokens (b : list Z) (r : Z) : list Z :=
  flat_map (fun d => map (fun j => nth d b 0 + (Z.of_nat j + 1) * r - 1)
                         (seq 0 (Z.to_nat (block_count b r d))))
           (seq 0 (pred (length b))).

Definition count_below (x : Z) (l : list Z) : Z :=
  Z.of_nat (length (filter (fun t => t <? x) l)).

(* owners[p], p = 0..size with size = b.back() / L: the number of blocks whose last raw
   token is < p L. *)
Definition compressed_owner_offsets (b : list Z) (r L : Z) : list Z :=
  map (fun p => count_below (Z.of_nat p * L) (block_last_tokens b r))
      (seq 0 (S (Z.to_nat (last b 0 / L)))).

(* The closed form the C++ computes: keys[d] + floor((p L - b_d) / r), d = doc(p L). *)
Definition owner_offset_formula (b : list Z) (r L : Z) (p : nat) : Z :=
  let x := Z.of_nat p * L in
  nth (doc_index b x) (compressed_document_offsets b r) 0 + (x - doc_start b x) / r.

(* SPEC 7.4: peer p's interval (keys[doc(p L)], owners[p+1]). *)
Definition prefix_intervals (b : list Z) (r L : Z) (size : nat) : list (Z * Z) :=
  map (fun p => (nth (doc_index b (Z.of_nat p * L)) (compressed_document_offsets b r) 0,
                 own (compressed_owner_offsets b r L) (S p)))
      (seq 0 size).

(* ------------------------------------------------------------------------- *)
(* API level for 7.2 and 7.4                                                  *)

Definition check_boundaries (b : list Z) (L size : Z) : bool :=
  Nat.leb 2 (length b) && (nth 0 b 0 =? 0) && (last b 0 =? L * size) &&
  forallb (fun i => nth i b 0 <? nth (S i) b 0) (seq 0 (pred (length b))).

Definition sliding_window_route (b : list Z) (L size rank w : Z) : option route :=
  if (0 <? L) && (0 <? size) && (0 <=? rank) && (rank <? size) && (0 <? w) &&
     check_boundaries b L size
  then interval_route L rank (window_intervals b L (Z.to_nat size) w) None
  else None.

Definition document_prefix_route (b : list Z) (L size rank r : Z) : option route :=
  if ((r =? 1) || (r =? 2)) && (0 <? L) && (0 <? size) && (0 <=? rank) && (rank <? size) &&
     check_boundaries b L size
  then let o := compressed_owner_offsets b r L in
       let k := Z.to_nat rank in
       interval_route (own o (S k) - own o k) rank (prefix_intervals b r L (Z.to_nat size))
                      (Some o)
  else None.

(* ------------------------------------------------------------------------- *)
(* SPEC 8.1: forward dispatch                                                 *)

(* The send buffer: local rows [offset, offset + count) for each peer in order
   (Route::owner_ranges). *)
Definition pack {A : Type} (R : route) (local : list A) : list A :=
  concat (map (fun p => slice (nth p (send_offsets R) 0)
                              (nth p (send_offsets R) 0 + nth p (input_splits R) 0) local)
              (seq 0 (length (input_splits R)))).

(* all-to-all-v over P ranks: rank r receives, in peer order, the r-th piece of every
   sender q's buffer, cut by q's send counts. *)
Definition all_to_all_v {A : Type} (P : nat) (sendbuf : nat -> list A)
           (send_counts : nat -> list Z) (r : nat) : list A :=
  concat (map (fun q => chunk r (send_counts q) (sendbuf q)) (seq 0 P)).

(* The output: received[:local_output_start] ++ local ++ received[local_output_start:],
   or the input itself without exchange. *)
Definition assemble {A : Type} (R : route) (received local : list A) : list A :=
  if route_needs_exchange R
  then firstn (Z.to_nat (local_output_start R)) received ++ local ++
       skipn (Z.to_nat (local_output_start R)) received
  else local.

(* Rank r's forward output, given every rank's route and local shard. *)
Definition forward {A : Type} (P : nat) (R : nat -> route) (local : nat -> list A) (r : nat)
  : list A :=
  assemble (R r)
           (all_to_all_v P (fun q => pack (R q) (local q)) (fun q => input_splits (R q)) r)
           (local r).

(* The gather the SPEC says forward equals: out[i] = x[start + i], i < end - start. *)
Definition gather (x : list Z) (s e : Z) : list Z :=
  map (fun i => nth (Z.to_nat s + i) x 0) (seq 0 (Z.to_nat (e - s))).

(* ------------------------------------------------------------------------- *)
(* SPEC 8.2: backward dispatch                                                *)

(* Row-wise base[i] += rows[i]. *)
Fixpoint add_rows (rows base : list Z) : list Z :=
  match rows, base with
  | x :: xs, y :: ys => (y + x) :: add_rows xs ys
  | _, _ => base
  end.

(* base[off + i] += rows[i] for every received row i. *)
Definition add_at (off : Z) (rows base : list Z) : list Z :=
  firstn (Z.to_nat off) base ++ add_rows rows (skipn (Z.to_nat off) base).

(* For each peer in ascending rank, add its received rows (cut by the forward send
   counts) at that peer's forward send offset. *)
Definition unpack_add (R : route) (received grad : list Z) : list Z :=
  fold_left (fun acc p => add_at (nth p (send_offsets R) 0)
                                 (chunk p (input_splits R) received) acc)
            (seq 0 (length (input_splits R))) grad.

(* The gradient rows a rank sends back: everything outside
   [local_output_start, local_output_start + local_length). *)
Definition backward_sendbuf (R : route) (g : list Z) : list Z :=
  firstn (Z.to_nat (local_output_start R)) g ++
  skipn (Z.to_nat (local_output_start R + local_length R)) g.

Definition own_block (R : route) (g : list Z) : list Z :=
  slice (local_output_start R) (local_output_start R + local_length R) g.

(* Rank r's input gradient: its own block, then received rows added (splits swapped). *)
Definition backward (P : nat) (R : nat -> route) (g : nat -> list Z) (r : nat) : list Z :=
  if route_needs_exchange (R r)
  then unpack_add (R r)
         (all_to_all_v P (fun q => backward_sendbuf (R q) (g q))
                       (fun q => output_splits (R q)) r)
         (own_block (R r) (g r))
  else own_block (R r) (g r).

(* Inner product over Z (of equal-length lists). *)
Fixpoint dot (a b : list Z) : Z :=
  match a, b with
  | x :: xs, y :: ys => x * y + dot xs ys
  | _, _ => 0
  end.
