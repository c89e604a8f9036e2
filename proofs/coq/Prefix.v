From Hpref Require Import Model Lib Symmetry Intervals.
From Coq Require Import ZArith Lia List Bool.
Import ListNotations.
Open Scope Z_scope.

(* Theorems 4b and 6: the document-prefix route of SPEC 7.4 with the compressed owners
   of SPEC 7.3.

   - Theorem 4b: its owners and intervals pass every check of SPEC 7.1, so
     document_prefix_route succeeds on every valid argument; on the way we show that
     the owners the model defines (counting blocks by their last raw token) equal the
     closed form the C++ computes (keys[d] + floor((p L - b_d) / r), d = doc(p L)).
   - Theorem 6: with ratio 1 the document-prefix route is the sliding-window route with
     a window at least the whole sequence.

   The facts about find_last, doc_index, doc_start and the boundaries come from
   Intervals.v; the helpers proper to this file start with [pfx_]. *)

(* ------------------------------------------------------------------------- *)
(* Counting                                                                    *)

Lemma pfx_count_below_nil : forall x, count_below x [] = 0.
Proof. reflexivity. Qed.

Lemma pfx_count_below_app : forall x l1 l2,
  count_below x (l1 ++ l2) = count_below x l1 + count_below x l2.
Proof. intros. unfold count_below. rewrite filter_app, app_length. lia. Qed.

Lemma pfx_count_below_one : forall x t,
  count_below x [t] = if t <? x then 1 else 0.
Proof. intros. unfold count_below. simpl. destruct (t <? x); reflexivity. Qed.

(* count_below is monotone in its bound. *)
Lemma pfx_count_below_mono : forall x y l, x <= y -> count_below x l <= count_below y l.
Proof.
  intros x y l Hxy. unfold count_below. induction l as [| a l IH]; simpl; [lia|].
  destruct (Z.ltb_spec a x); destruct (Z.ltb_spec a y); simpl; lia.
Qed.

Lemma pfx_count_flat_map_seq : forall (F : nat -> list Z) x k a,
  count_below x (flat_map F (seq a k)) = sumZ (map (fun e => count_below x (F e)) (seq a k)).
Proof.
  intros F x k. induction k; intros a; simpl; [reflexivity|].
  rewrite pfx_count_below_app, IHk. reflexivity.
Qed.

(* The blocks of one document: those of m blocks starting at c0 whose last raw token is
   below x number min(m, max(0, floor((x - c0) / r))). *)
Lemma pfx_count_block : forall c0 r x m, 0 < r ->
  count_below x (map (fun j => c0 + (Z.of_nat j + 1) * r - 1) (seq 0 m)) =
  Z.min (Z.of_nat m) (Z.max 0 ((x - c0) / r)).
Proof.
  intros c0 r x m Hr. induction m.
  - simpl. rewrite pfx_count_below_nil. pose proof (Z.le_max_l 0 ((x - c0) / r)). lia.
  - rewrite seq_S, map_app, pfx_count_below_app, IHm. simpl map.
    rewrite pfx_count_below_one. simpl (0 + m)%nat.
    destruct (Z.ltb_spec (c0 + (Z.of_nat m + 1) * r - 1) x).
    + assert (Z.of_nat m + 1 <= (x - c0) / r).
      { apply Z.div_le_lower_bound; lia. }
      lia.
    + assert ((x - c0) / r < Z.of_nat m + 1).
      { apply Z.div_lt_upper_bound; lia. }
      lia.
Qed.

(* ------------------------------------------------------------------------- *)
(* Block counts, keys, owners                                                 *)

Lemma pfx_block_count_nonneg : forall b r d,
  0 < r -> nth d b 0 <= nth (S d) b 0 -> 0 <= block_count b r d.
Proof. intros. unfold block_count. apply Z.div_pos; lia. Qed.

Lemma pfx_psums_nth : forall l acc i, (i <= length l)%nat ->
  nth i (psums acc l) 0 = acc + sumZ (firstn i l).
Proof.
  induction l as [| c l IH]; intros acc i Hi; simpl in *.
  - destruct i; [simpl; lia | lia].
  - destruct i; simpl; [lia|]. rewrite IH by lia. lia.
Qed.

(* keys[d] = the number of blocks of the documents before d. *)
Lemma pfx_keys_nth : forall b r d, (d <= pred (length b))%nat ->
  nth d (compressed_document_offsets b r) 0 = sumZ (map (block_count b r) (seq 0 d)).
Proof.
  intros. unfold compressed_document_offsets.
  rewrite pfx_psums_nth by (rewrite map_length, seq_length; lia).
  rewrite firstn_map, firstn_seq by lia. lia.
Qed.

Section Blocks.

Variables (b : list Z) (r : Z).
Hypothesis Hr : 0 < r.
Hypothesis Hlen : (2 <= length b)%nat.
Hypothesis H0 : nth 0 b 0 = 0.
Hypothesis Hinc : forall i, (S i < length b)%nat -> nth i b 0 < nth (S i) b 0.

Let D := pred (length b).

Lemma pfx_bc_nonneg : forall e, (e < D)%nat -> 0 <= block_count b r e.
Proof.
  intros. apply pfx_block_count_nonneg; auto. pose proof (Hinc e ltac:(unfold D in *; lia)). lia.
Qed.

Lemma pfx_keys_nonneg : forall d, (d <= D)%nat -> 0 <= sumZ (map (block_count b r) (seq 0 d)).
Proof.
  intros. apply sumZ_nonneg. apply Forall_forall. intros c Hc.
  apply in_map_iff in Hc. destruct Hc as (e & <- & He). apply in_seq in He.
  apply pfx_bc_nonneg. lia.
Qed.

(* The count of blocks ending below x, document by document. *)
Lemma pfx_count_blt : forall x,
  count_below x (block_last_tokens b r) =
  sumZ (map (fun e => Z.min (block_count b r e) (Z.max 0 ((x - nth e b 0) / r))) (seq 0 D)).
Proof.
  intros. unfold block_last_tokens. rewrite pfx_count_flat_map_seq.
  apply sumZ_map_ext. intros e He. apply in_seq in He.
  rewrite pfx_count_block by auto. rewrite Z2Nat.id; auto.
  apply pfx_bc_nonneg. unfold D. lia.
Qed.

(* The closed form: for b_0 <= x <= b_D, with d = doc(x), the blocks ending below x are
   all blocks of documents before d and floor((x - b_d) / r) blocks of document d. *)
Lemma pfx_count_blt_formula : forall x, 0 <= x -> x <= nth D b 0 ->
  count_below x (block_last_tokens b r) =
  sumZ (map (block_count b r) (seq 0 (doc_index b x))) + (x - nth (doc_index b x) b 0) / r.
Proof.
  intros x Hx HxD. rewrite pfx_count_blt.
  set (d := doc_index b x).
  assert (Hd : (d < length b)%nat) by (apply doc_index_lt; lia).
  assert (Hbd : nth d b 0 <= x) by (apply doc_index_le; lia).
  (* documents before d are counted whole *)
  assert (Hbefore : forall e, (e < d)%nat ->
            Z.min (block_count b r e) (Z.max 0 ((x - nth e b 0) / r)) = block_count b r e).
  { intros e He. pose proof (pfx_bc_nonneg e ltac:(unfold D; lia)).
    pose proof (increasing_le b Hinc (S e) d ltac:(lia)).
    assert (block_count b r e <= (x - nth e b 0) / r).
    { unfold block_count. apply Z.div_le_mono; lia. }
    lia. }
  (* documents after d not at all *)
  assert (Hafter : forall e, (d < e < D)%nat ->
            Z.min (block_count b r e) (Z.max 0 ((x - nth e b 0) / r)) = 0).
  { intros e He. pose proof (doc_index_after b x e ltac:(unfold D in *; lia)).
    assert ((x - nth e b 0) / r < 0) by (apply Z.div_lt_upper_bound; lia).
    pose proof (pfx_bc_nonneg e ltac:(lia)).
    lia. }
  destruct (Nat.lt_ge_cases d D) as [HdD | HdD].
  - replace D with (d + (1 + (D - S d)))%nat by lia.
    rewrite seq_app, map_app, sumZ_app. simpl (0 + d)%nat.
    simpl seq. simpl map. simpl sumZ.
    rewrite (sumZ_map_ext _ _ (block_count b r)).
    2:{ intros e He. apply in_seq in He. apply Hbefore. lia. }
    match goal with |- context [sumZ (map ?f (seq (S d) ?n))] =>
      rewrite (sumZ_map_zero _ f (seq (S d) n)) end.
    2:{ intros e He. apply in_seq in He. apply Hafter. unfold D in *. lia. }
    assert (0 <= (x - nth d b 0) / r) by (apply Z.div_pos; lia).
    assert ((x - nth d b 0) / r <= block_count b r d).
    { unfold block_count. apply Z.div_le_mono; auto.
      pose proof (doc_index_after b x (S d) ltac:(unfold D in *; lia)). lia. }
    lia.
  - assert (d = D) by (unfold D in *; lia).
    assert (nth d b 0 = x) by (rewrite H in Hbd |- *; lia).
    rewrite H1, Z.sub_diag, Zdiv_0_l, Z.add_0_r. rewrite H.
    apply sumZ_map_ext. intros e He. apply in_seq in He. apply Hbefore. lia.
Qed.

End Blocks.

Lemma pfx_owners_length : forall b r L size, 0 < L -> boundaries_ok b L size ->
  length (compressed_owner_offsets b r L) = S size.
Proof.
  intros b r L size HL (_ & _ & Hl & _). unfold compressed_owner_offsets.
  rewrite map_length, seq_length, Hl, Z.mul_comm, Z.div_mul by lia.
  rewrite Nat2Z.id. reflexivity.
Qed.

(* owners[p] is the number of blocks whose last raw token is below p L. *)
Lemma pfx_own_count : forall b r L size p, 0 < L -> boundaries_ok b L size -> (p <= size)%nat ->
  own (compressed_owner_offsets b r L) p = count_below (Z.of_nat p * L) (block_last_tokens b r).
Proof.
  intros b r L size p HL Hb Hp. pose proof (pfx_owners_length b r L size HL Hb) as E.
  unfold own, compressed_owner_offsets in *. rewrite map_length, seq_length in E.
  rewrite nth_map_seq by lia. reflexivity.
Qed.

(* The compressed owners are non-decreasing. *)
Lemma pfx_own_mono : forall b r L size i j, 0 < L -> boundaries_ok b L size ->
  (i <= j <= size)%nat ->
  own (compressed_owner_offsets b r L) i <= own (compressed_owner_offsets b r L) j.
Proof.
  intros. rewrite !(pfx_own_count b r L size) by (auto; lia).
  apply pfx_count_below_mono. nia.
Qed.

(* The model's owners equal the C++ closed form keys[doc(p L)] + floor((p L - doc_start(p L)) / r)
   for every p = 0..size. *)
Theorem compressed_owner_offsets_formula : forall b r L size p,
  0 < r -> 0 < L -> boundaries_ok b L size -> (p <= size)%nat ->
  owner_offset_formula b r L p = own (compressed_owner_offsets b r L) p.
Proof.
  intros b r L size p Hr HL Hb Hp.
  pose proof Hb as (Hlen & H0 & _ & Hinc).
  rewrite (pfx_own_count b r L size) by auto.
  rewrite pfx_count_blt_formula; auto.
  - unfold owner_offset_formula, doc_start.
    rewrite pfx_keys_nth; [reflexivity|].
    pose proof (doc_index_lt b (Z.of_nat p * L) ltac:(lia)). lia.
  - lia.
  - rewrite (boundaries_last b L size Hb). nia.
Qed.

(* keys[doc(p L)] in terms of block counts, and its bounds. *)
Lemma pfx_key_bounds : forall b r L size p, 0 < r -> 0 < L -> boundaries_ok b L size ->
  (p <= size)%nat ->
  0 <= nth (doc_index b (Z.of_nat p * L)) (compressed_document_offsets b r) 0 <=
       own (compressed_owner_offsets b r L) p.
Proof.
  intros b r L size p Hr HL Hb Hp.
  pose proof Hb as (Hlen & H0 & _ & Hinc).
  set (x := Z.of_nat p * L).
  assert (Hd : (doc_index b x < length b)%nat) by (apply doc_index_lt; lia).
  assert (Hbd : nth (doc_index b x) b 0 <= x) by (apply doc_index_le; subst x; lia).
  rewrite pfx_keys_nth by lia.
  rewrite (pfx_own_count b r L size) by auto. fold x.
  rewrite pfx_count_blt_formula; auto.
  - pose proof (pfx_keys_nonneg b r Hr Hlen Hinc (doc_index b x) ltac:(lia)).
    assert (0 <= (x - nth (doc_index b x) b 0) / r) by (apply Z.div_pos; lia). lia.
  - subst x. lia.
  - rewrite (boundaries_last b L size Hb). subst x. nia.
Qed.

Lemma pfx_prefix_length : forall b r L size, length (prefix_intervals b r L size) = size.
Proof. intros. unfold prefix_intervals. rewrite map_length, seq_length. reflexivity. Qed.

Lemma pfx_prefix_nth : forall b r L size p, (p < size)%nat ->
  ist (prefix_intervals b r L size) p =
    nth (doc_index b (Z.of_nat p * L)) (compressed_document_offsets b r) 0 /\
  ien (prefix_intervals b r L size) p = own (compressed_owner_offsets b r L) (S p).
Proof.
  intros. unfold ist, ien, prefix_intervals. rewrite nth_map_seq by auto. simpl. auto.
Qed.

(* ------------------------------------------------------------------------- *)
(* Theorem 4b                                                                 *)

(* For any positive ratio, the compressed owners and prefix intervals pass the
   rank-independent checks (a) and (b) of SPEC 7.1. *)
Lemma pfx_prefix_shared_ok : forall b r L size,
  0 < r -> 0 < L -> (1 <= size)%nat -> boundaries_ok b L size ->
  shared_ok (compressed_owner_offsets b r L) (prefix_intervals b r L size).
Proof.
  intros b r L size Hr HL Hs Hb.
  pose proof Hb as (Hlen & H0 & _ & Hinc).
  split; [split; [| split; [| split]] |]; rewrite ?pfx_prefix_length.
  - rewrite (pfx_owners_length b r L size HL Hb). reflexivity.
  - auto.
  - rewrite (pfx_own_count b r L size) by (auto; lia). simpl Z.of_nat. rewrite Z.mul_0_l.
    rewrite pfx_count_blt_formula; auto; try lia.
    + assert (doc_index b 0 = O).
      { destruct (Nat.eq_dec (doc_index b 0) 0); auto.
        pose proof (doc_index_le b 0 ltac:(lia) ltac:(lia)).
        pose proof (increasing_lt b Hinc 0 (doc_index b 0)
                      ltac:(pose proof (doc_index_lt b 0 ltac:(lia)); lia)). lia. }
      rewrite H. simpl. rewrite H0. reflexivity.
    + rewrite (boundaries_last b L size Hb). lia.
  - intros p Hp. apply (pfx_own_mono b r L size); auto; lia.
  - intros p Hp. rewrite pfx_prefix_length in Hp.
    destruct (pfx_prefix_nth b r L size p Hp) as [-> ->].
    pose proof (pfx_key_bounds b r L size p Hr HL Hb ltac:(lia)).
    pose proof (pfx_own_mono b r L size p (S p) HL Hb ltac:(lia)).
    pose proof (pfx_own_mono b r L size (S p) size HL Hb ltac:(lia)).
    rewrite pfx_prefix_length. lia.
Qed.

(* Theorem 4b.  For ratio 1 or 2, positive local length L, at least one rank and
   boundaries that pass check (b) of SPEC 7.2 (2+ entries, from 0 to L * size, strictly
   increasing), the document-prefix intervals (keys[doc(p L)], owners[p+1]) with the
   compressed owners of SPEC 7.3 meet every rank-independent validity condition of
   SPEC 7.1: owners has size+1 entries, starts at 0 and never decreases, and every peer p
   has 0 <= start_p <= owners[p] <= owners[p+1] <= end_p <= owners[size].  The owners
   the model defines (blocks counted by their last raw token) are also the closed form
   the C++ computes, for every p = 0..size. *)
Theorem theorem4b_prefix_intervals_valid : forall b r L size,
  (r = 1 \/ r = 2) -> 0 < L -> (1 <= size)%nat -> boundaries_ok b L size ->
  shared_ok (compressed_owner_offsets b r L) (prefix_intervals b r L size) /\
  (forall p, (p <= size)%nat ->
     owner_offset_formula b r L p = own (compressed_owner_offsets b r L) p).
Proof.
  intros b r L size Hr HL Hs Hb. split.
  - apply pfx_prefix_shared_ok; auto; lia.
  - intros p Hp. apply (compressed_owner_offsets_formula b r L size); auto; lia.
Qed.

(* Theorem 4b at the API: for ratio 1 or 2, positive local length, positive size and
   boundaries the API accepts, document_prefix_route succeeds for every rank in
   [0, size) and returns the route that build makes from the compressed owners and the
   prefix intervals. *)
Theorem theorem4b_api : forall b L size rank r,
  (r = 1 \/ r = 2) -> 0 < L -> 0 < size -> check_boundaries b L size = true ->
  0 <= rank < size ->
  document_prefix_route b L size rank r =
  Some (build (compressed_owner_offsets b r L) (prefix_intervals b r L (Z.to_nat size))
              (Z.to_nat rank)).
Proof.
  intros b L size rank r Hr HL Hs Hc Hrank.
  assert (Hb := proj1 (check_boundaries_Z b L size ltac:(lia)) Hc).
  assert (Hsh := pfx_prefix_shared_ok b r L (Z.to_nat size) ltac:(lia) HL ltac:(lia) Hb).
  unfold document_prefix_route.
  replace ((r =? 1) || (r =? 2)) with true by (destruct Hr; subst; reflexivity).
  rewrite (proj2 (Z.ltb_lt 0 L) HL), (proj2 (Z.ltb_lt 0 size) Hs),
          (proj2 (Z.leb_le 0 rank) ltac:(lia)), (proj2 (Z.ltb_lt rank size) ltac:(lia)), Hc.
  simpl andb. cbv iota.
  apply interval_route_spec. simpl owners_of.
  destruct Hsh as [Ho Hi].
  split; [lia|]. split; [|reflexivity].
  split; [auto|]. split; [rewrite pfx_prefix_length; lia|]. split; auto.
Qed.

(* ------------------------------------------------------------------------- *)
(* Theorem 6                                                                  *)

(* With ratio 1, keys[d] = b_d. *)
Lemma pfx_keys_ratio1 : forall b d, nth 0 b 0 = 0 -> (d <= pred (length b))%nat ->
  nth d (compressed_document_offsets b 1) 0 = nth d b 0.
Proof.
  intros b d H0 Hd. rewrite pfx_keys_nth by auto.
  rewrite (sumZ_map_ext _ _ (fun q => nth (S q) b 0 - nth q b 0)).
  - rewrite (sumZ_telescope (fun i => nth i b 0)). simpl. rewrite H0. lia.
  - intros e _. unfold block_count. apply Z.div_1_r.
Qed.

(* Theorem 6.  With ratio 1, positive L, at least one rank, valid boundaries and a window
   w at least the whole sequence L * size, the compressed owners are the default owners
   p * L and the document-prefix intervals are the sliding-window intervals; hence the
   two give the same route (build) on every rank. *)
Theorem theorem6_ratio1_prefix_is_window : forall b L size w,
  0 < L -> (1 <= size)%nat -> boundaries_ok b L size -> L * Z.of_nat size <= w ->
  compressed_owner_offsets b 1 L = default_owners L size /\
  prefix_intervals b 1 L size = window_intervals b L size w /\
  (forall rank, build (compressed_owner_offsets b 1 L) (prefix_intervals b 1 L size) rank =
                build (default_owners L size) (window_intervals b L size w) rank).
Proof.
  intros b L size w HL Hs Hb Hw.
  pose proof Hb as (Hlen & H0 & _ & Hinc).
  assert (Eo : compressed_owner_offsets b 1 L = default_owners L size).
  { apply nth_ext with (d := 0) (d' := 0).
    - rewrite (pfx_owners_length b 1 L size HL Hb), default_owners_length. reflexivity.
    - intros p Hp. rewrite (pfx_owners_length b 1 L size HL Hb) in Hp.
      fold (own (compressed_owner_offsets b 1 L) p).
      rewrite <- (compressed_owner_offsets_formula b 1 L size) by (auto; lia).
      fold (own (default_owners L size) p). rewrite own_default_owners by lia.
      unfold owner_offset_formula, doc_start.
      pose proof (doc_index_lt b (Z.of_nat p * L) ltac:(lia)).
      rewrite pfx_keys_ratio1 by (auto; lia). rewrite Z.div_1_r. lia. }
  assert (Ei : prefix_intervals b 1 L size = window_intervals b L size w).
  { unfold prefix_intervals, window_intervals. apply map_ext_in. intros p Hp.
    apply in_seq in Hp.
    pose proof (doc_index_lt b (Z.of_nat p * L) ltac:(lia)).
    rewrite pfx_keys_ratio1 by (auto; lia). fold (doc_start b (Z.of_nat p * L)).
    rewrite Eo, own_default_owners by lia.
    pose proof (doc_start_bounds b L size (Z.of_nat p * L) Hb ltac:(lia)).
    f_equal; [| lia]. nia. }
  split; [auto | split; [auto|]]. intros. rewrite Eo, Ei. reflexivity.
Qed.

(* Theorem 6 at the API: for positive L and size, boundaries the API accepts and a window
   w >= L * size, document_prefix_route with ratio 1 and sliding_window_route return the
   same answer for every rank (the same route in [0, size), None outside). *)
Theorem theorem6_api : forall b L size w rank,
  0 < L -> 0 < size -> check_boundaries b L size = true -> L * size <= w ->
  document_prefix_route b L size rank 1 = sliding_window_route b L size rank w.
Proof.
  intros b L size w rank HL Hs Hc Hw.
  assert (Hb := proj1 (check_boundaries_Z b L size ltac:(lia)) Hc).
  destruct (theorem6_ratio1_prefix_is_window b L (Z.to_nat size) w HL ltac:(lia) Hb
              ltac:(rewrite Z2Nat.id; lia)) as (Eo & Ei & _).
  unfold document_prefix_route, sliding_window_route.
  rewrite (proj2 (Z.ltb_lt 0 L) HL), (proj2 (Z.ltb_lt 0 size) Hs),
          (proj2 (Z.ltb_lt 0 w) ltac:(nia)), Hc.
  simpl orb. simpl andb.
  destruct (Z.leb_spec 0 rank); destruct (Z.ltb_spec rank size); simpl andb; cbv iota; auto.
  rewrite Eo, Ei, !own_default_owners by lia.
  replace (Z.of_nat (S (Z.to_nat rank)) * L - Z.of_nat (Z.to_nat rank) * L) with L by lia.
  unfold interval_route. simpl owners_of.
  rewrite window_length. reflexivity.
Qed.

(* ------------------------------------------------------------------------- *)
(* The hypotheses are satisfiable: a concrete input of two documents.          *)

(* Boundaries [0; 3; 8] with L = 4 and size = 2 pass check (b). *)
Example pfx_example_boundaries : boundaries_ok [0; 3; 8] 4 2.
Proof.
  split; [simpl; lia | split; [reflexivity | split; [reflexivity |]]].
  intros i Hi. simpl in Hi. destruct i as [| [| i]]; simpl; lia.
Qed.

(* With ratio 2 the blocks end at raw tokens 1, 4, 6: owners [0; 1; 3], keys
   [0; 1; 3], intervals (0, 1) and (1, 3). *)
Example pfx_example_owners :
  compressed_owner_offsets [0; 3; 8] 2 4 = [0; 1; 3] /\
  prefix_intervals [0; 3; 8] 2 4 2 = [(0, 1); (1, 3)] /\
  document_prefix_route [0; 3; 8] 4 2 1 2 =
    Some (build [0; 1; 3] [(0, 1); (1, 3)] 1).
Proof. vm_compute. auto. Qed.
