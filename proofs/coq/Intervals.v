From Hpref Require Import Model Lib Symmetry.
From Coq Require Import ZArith Lia List Bool.
Import ListNotations.
Open Scope Z_scope.

(* Theorem 4: the sliding-window intervals of SPEC 7.2 always pass the checks of
   SPEC 7.1 with the default owners p * local_length, so the C++ never refuses a
   sliding-window route whose own arguments (7.2 checks (a) and (b)) are valid. *)

(* ------------------------------------------------------------------------- *)
(* find_last, doc_index, doc_start, boundaries                               *)
(* (Prefix.v uses these too.)                                                 *)

(* If some i < n satisfies f, find_last returns an index that satisfies f, lies in
   [i, n), and is therefore in range. *)
Lemma find_last_spec : forall (f : nat -> bool) n i,
  (i < n)%nat -> f i = true ->
  f (find_last f n) = true /\ (i <= find_last f n < n)%nat.
Proof.
  intros f n; induction n as [| m IH]; intros i Hi Hf; [lia|].
  simpl. destruct (f m) eqn:Em.
  - split; [auto | lia].
  - assert (i <> m) by (intro; subst; congruence).
    destruct (IH i ltac:(lia) Hf). split; [auto | lia].
Qed.

(* find_last is in range even when no index satisfies f. *)
Lemma find_last_lt : forall f n, (0 < n)%nat -> (find_last f n < n)%nat.
Proof.
  induction n; intros H; simpl; [lia|]. destruct (f n); [lia|].
  destruct (Nat.eq_dec n 0); [subst; simpl; lia|]. specialize (IHn ltac:(lia)). lia.
Qed.

(* No index above find_last satisfies f. *)
Lemma find_last_after : forall f n j, (find_last f n < j < n)%nat -> f j = false.
Proof.
  induction n; intros j H; simpl in H; [lia|].
  destruct (f n) eqn:E; [lia|].
  destruct (Nat.eq_dec j n); [subst; auto | apply IHn; lia].
Qed.

Lemma last_nth : forall (l : list Z) d, last l d = nth (pred (length l)) l d.
Proof.
  induction l as [| a l IH]; intros d; auto.
  destruct l as [| c l]; auto.
  change (last (a :: c :: l) d) with (last (c :: l) d). rewrite IH. reflexivity.
Qed.

(* Strictly increasing boundaries are increasing between any two indices. *)
Lemma increasing_lt : forall (b : list Z),
  (forall i, (S i < length b)%nat -> nth i b 0 < nth (S i) b 0) ->
  forall i j, (i < j < length b)%nat -> nth i b 0 < nth j b 0.
Proof.
  intros b H i j. induction j; intros Hij; [lia|].
  destruct (Nat.eq_dec i j); [subst; apply H; lia|].
  specialize (IHj ltac:(lia)). specialize (H j ltac:(lia)). lia.
Qed.

Lemma increasing_le : forall (b : list Z),
  (forall i, (S i < length b)%nat -> nth i b 0 < nth (S i) b 0) ->
  forall i j, (i <= j < length b)%nat -> nth i b 0 <= nth j b 0.
Proof.
  intros. destruct (Nat.eq_dec i j); [subst; lia|].
  pose proof (increasing_lt b H i j ltac:(lia)). lia.
Qed.

(* The last boundary of valid boundaries is L * size. *)
Lemma boundaries_last : forall b L size, boundaries_ok b L size ->
  nth (pred (length b)) b 0 = L * Z.of_nat size.
Proof. intros b L size (_ & _ & Hl & _). rewrite <- last_nth. auto. Qed.

(* doc(x) for x >= b_0: a boundary index with b_d <= x < b_{d+1} (the latter when d
   is not the last index). *)
Lemma doc_index_lt : forall b x, (1 <= length b)%nat -> (doc_index b x < length b)%nat.
Proof. intros. unfold doc_index. apply find_last_lt. lia. Qed.

Lemma doc_index_le : forall b x, (1 <= length b)%nat -> nth 0 b 0 <= x ->
  nth (doc_index b x) b 0 <= x.
Proof.
  intros b x Hl H0. unfold doc_index.
  destruct (find_last_spec (fun i => nth i b 0 <=? x) (length b) 0 ltac:(lia)) as [Hf _].
  - apply Z.leb_le. auto.
  - apply Z.leb_le. auto.
Qed.

Lemma doc_index_after : forall b x j, (doc_index b x < j < length b)%nat -> x < nth j b 0.
Proof.
  intros. unfold doc_index in *.
  pose proof (find_last_after (fun i => nth i b 0 <=? x) (length b) j H) as H1.
  simpl in H1. apply Z.leb_gt. auto.
Qed.

(* For x >= 0, doc_start(x), the largest boundary <= x, is a boundary between 0 and x. *)
Lemma doc_start_bounds : forall b L size x, boundaries_ok b L size -> 0 <= x ->
  (doc_index b x < length b)%nat /\ 0 <= doc_start b x <= x.
Proof.
  intros b L size x (Hlen & H0 & _ & Hinc) Hx.
  pose proof (doc_index_lt b x ltac:(lia)).
  pose proof (doc_index_le b x ltac:(lia) ltac:(lia)).
  pose proof (increasing_le b Hinc 0 (doc_index b x) ltac:(lia)).
  unfold doc_start. lia.
Qed.

(* ------------------------------------------------------------------------- *)
(* check_boundaries decides boundaries_ok                                     *)

Lemma check_boundaries_spec : forall b L size,
  check_boundaries b L (Z.of_nat size) = true <-> boundaries_ok b L size.
Proof.
  intros. unfold check_boundaries, boundaries_ok.
  rewrite !andb_true_iff, Nat.leb_le, !Z.eqb_eq, forallb_forall.
  split.
  - intros (((Hl & H0) & Hlast) & Hinc). split; [auto|]. split; [auto|]. split; [auto|].
    intros i Hi. apply Z.ltb_lt. apply Hinc. apply in_seq. lia.
  - intros (Hl & H0 & Hlast & Hinc). split; [split; [split|]|]; auto.
    intros i Hi. apply in_seq in Hi. apply Z.ltb_lt. apply Hinc. lia.
Qed.

(* The same for an integer size, as the API takes it. *)
Lemma check_boundaries_Z : forall b L size, 0 <= size ->
  check_boundaries b L size = true <-> boundaries_ok b L (Z.to_nat size).
Proof.
  intros b L size Hs. rewrite <- check_boundaries_spec. rewrite Z2Nat.id by auto.
  reflexivity.
Qed.

(* ------------------------------------------------------------------------- *)
(* The window intervals and the default owners, entry by entry                *)

Lemma window_length : forall b L size w,
  length (window_intervals b L size w) = size.
Proof. intros. unfold window_intervals. rewrite map_length, seq_length. reflexivity. Qed.

Lemma window_nth : forall b L size w p, (p < size)%nat ->
  ist (window_intervals b L size w) p =
    Z.max (doc_start b (Z.of_nat p * L)) (Z.of_nat p * L - w + 1) /\
  ien (window_intervals b L size w) p = (Z.of_nat p + 1) * L.
Proof.
  intros. unfold ist, ien, window_intervals. rewrite nth_map_seq by auto.
  simpl. split; reflexivity.
Qed.

Lemma default_owners_length : forall L P, length (default_owners L P) = S P.
Proof. intros. unfold default_owners. rewrite map_length, seq_length. reflexivity. Qed.

(* With local_length >= 0 the default owners pass check (a) (without the rank) for
   any P >= 1 intervals. *)
Lemma default_owners_ok : forall L iv, 0 <= L -> (1 <= length iv)%nat ->
  owners_ok (default_owners L (length iv)) iv.
Proof.
  intros L iv HL HP. unfold owners_ok.
  rewrite default_owners_length. split; [reflexivity|]. split; [auto|]. split.
  - rewrite own_default_owners by lia. lia.
  - intros p Hp. rewrite !own_default_owners by lia. nia.
Qed.

(* ------------------------------------------------------------------------- *)
(* Theorem 4, model level                                                     *)

(* In words: take valid sliding-window arguments (local_length L > 0, size >= 1,
   window w > 0, boundaries that start at 0, end at L * size and strictly increase).
   Then the intervals SPEC 7.2 builds, one per rank, together with the default owners
   p * L, pass every check of SPEC 7.1:
   - there are exactly size intervals;
   - shared_ok: owners have size + 1 entries, size >= 1, owners[0] = 0, owners are
     non-decreasing (check (a) without the rank), and for every peer p,
     0 <= start_p <= owners[p] <= owners[p+1] <= end_p <= owners[size] (check (b));
   - route_valid: for every rank < size, in addition rank is in range and
     owners[rank+1] - owners[rank] = L (check (c)). *)
Theorem theorem4_window_intervals_valid : forall b L size w,
  0 < L -> (1 <= size)%nat -> 0 < w -> boundaries_ok b L size ->
  length (window_intervals b L size w) = size /\
  shared_ok (default_owners L size) (window_intervals b L size w) /\
  (forall rank, (rank < size)%nat ->
     route_valid L rank (default_owners L size) (window_intervals b L size w)).
Proof.
  intros b L size w HL Hsize Hw Hb.
  set (iv := window_intervals b L size w).
  assert (Hlen : length iv = size) by apply window_length.
  assert (Hown : owners_ok (default_owners L size) iv).
  { rewrite <- Hlen at 1. apply default_owners_ok; lia. }
  assert (Hiv : intervals_ok (default_owners L size) iv).
  { intros p Hp. rewrite Hlen in Hp |- *.
    destruct (window_nth b L size w p Hp) as [Hs He]. fold iv in Hs, He.
    rewrite Hs, He, !own_default_owners by lia.
    destruct (doc_start_bounds b L size (Z.of_nat p * L) Hb ltac:(lia)) as [_ Hd].
    rewrite Nat2Z.inj_succ.
    assert (Z.of_nat p + 1 <= Z.of_nat size) by lia.
    repeat split; nia. }
  split; [auto|]. split; [split; auto|].
  intros rank Hr. split; [auto|]. split; [lia|]. split; [auto|].
  rewrite !own_default_owners by lia. rewrite Nat2Z.inj_succ. lia.
Qed.

(* ------------------------------------------------------------------------- *)
(* Theorem 4, API level                                                       *)

(* In words: for valid arguments -- 0 < local_length, 0 < size, 0 <= rank < size,
   0 < window, and boundaries accepted by check_boundaries -- the API function
   sliding_window_route does not refuse: it returns the route that build (the route
   construction of SPEC 7.1) makes from the window intervals of SPEC 7.2 and the
   default owners p * local_length, for that rank.  (As everywhere in the model,
   arithmetic is over Z; the C++ additionally refuses values beyond int64.) *)
Theorem theorem4_api : forall b L size rank w,
  0 < L -> 0 < size -> 0 <= rank < size -> 0 < w ->
  check_boundaries b L size = true ->
  sliding_window_route b L size rank w =
    Some (build (default_owners L (Z.to_nat size))
                (window_intervals b L (Z.to_nat size) w) (Z.to_nat rank)).
Proof.
  intros b L size rank w HL Hs Hr Hw Hcb.
  unfold sliding_window_route.
  rewrite (proj2 (Z.ltb_lt 0 L) HL), (proj2 (Z.ltb_lt 0 size) Hs),
          (proj2 (Z.leb_le 0 rank) (proj1 Hr)), (proj2 (Z.ltb_lt rank size) (proj2 Hr)),
          (proj2 (Z.ltb_lt 0 w) Hw), Hcb. simpl.
  apply check_boundaries_Z in Hcb; [|lia].
  destruct (theorem4_window_intervals_valid b L (Z.to_nat size) w HL ltac:(lia) Hw Hcb)
    as (Hlen & _ & Hv).
  apply interval_route_spec. simpl. rewrite Hlen.
  split; [lia|]. split; [|reflexivity].
  apply Hv. lia.
Qed.

(* The converse, for completeness: whenever sliding_window_route returns a route, its
   arguments were valid and the route is the one above.  Together with theorem4_api:
   the API accepts exactly the valid arguments. *)
Theorem theorem4_api_iff : forall b L size rank w R,
  sliding_window_route b L size rank w = Some R <->
  (0 < L /\ 0 < size /\ 0 <= rank < size /\ 0 < w /\ check_boundaries b L size = true) /\
  R = build (default_owners L (Z.to_nat size))
            (window_intervals b L (Z.to_nat size) w) (Z.to_nat rank).
Proof.
  intros b L size rank w R. split.
  - intros H.
    destruct ((0 <? L) && (0 <? size) && (0 <=? rank) && (rank <? size) && (0 <? w) &&
              check_boundaries b L size) eqn:E;
      [| unfold sliding_window_route in H; rewrite E in H; discriminate].
    rewrite !andb_true_iff, !Z.ltb_lt, Z.leb_le in E.
    destruct E as (((((HL & Hs) & Hr0) & Hr) & Hw) & Hcb).
    split; [repeat split; auto; lia|].
    rewrite (theorem4_api b L size rank w HL Hs ltac:(lia) Hw Hcb) in H.
    inversion H. reflexivity.
  - intros ((HL & Hs & Hr & Hw & Hcb) & ->). apply theorem4_api; auto.
Qed.

(* ------------------------------------------------------------------------- *)
(* The hypotheses are satisfiable (a sanity check that the theorems are not
   vacuous): 2 ranks of 2 tokens each, documents [0, 3) and [3, 4), window 2.       *)

Example theorem4_hypotheses_satisfiable :
  boundaries_ok [0; 3; 4] 2 2 /\ check_boundaries [0; 3; 4] 2 2 = true /\
  window_intervals [0; 3; 4] 2 2 2 = [(0, 2); (1, 4)].
Proof.
  split; [|split; reflexivity].
  apply check_boundaries_spec. reflexivity.
Qed.

Example theorem4_api_example :
  exists R, sliding_window_route [0; 3; 4] 2 2 1 2 = Some R /\
            global_start R = 1 /\ global_end R = 4 /\ local_output_start R = 1.
Proof.
  eexists. split; [reflexivity|]. simpl. auto.
Qed.
