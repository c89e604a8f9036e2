(* Theorems 1 and 2: send/recv symmetry and the rank-independence of needs_exchange,
   for the core model (build) and for interval_route as the API returns it. *)

From Coq Require Import ZArith Lia List Bool.
From Hpref Require Import Model Lib.
Import ListNotations.
Open Scope Z_scope.

(* ------------------------------------------------------------------------- *)
(* Facts about valid owners and the fields of [build]                         *)

Lemma own_mono : forall o iv, owners_ok o iv ->
  forall i j, (i <= j <= length iv)%nat -> own o i <= own o j.
Proof.
  intros o iv (_ & _ & _ & Hm) i j Hij.
  assert (forall k, (i + k <= length iv)%nat -> own o i <= own o (i + k)).
  { induction k; intros; [rewrite Nat.add_0_r; lia|].
    specialize (IHk ltac:(lia)). specialize (Hm (i + k)%nat ltac:(lia)).
    replace (i + S k)%nat with (S (i + k)) by lia. lia. }
  replace j with (i + (j - i))%nat by lia. apply H. lia.
Qed.

Lemma build_input_splits : forall o iv r p, (p < length iv)%nat ->
  nth p (input_splits (build o iv r)) 0 = send_count o iv r p.
Proof. intros. simpl. rewrite nth_map_seq by auto. reflexivity. Qed.

Lemma build_output_splits : forall o iv r p, (p < length iv)%nat ->
  nth p (output_splits (build o iv r)) 0 = recv_count o iv r p.
Proof. intros. simpl. rewrite nth_map_seq by auto. reflexivity. Qed.

Lemma build_send_offsets : forall o iv r p, (p < length iv)%nat ->
  nth p (send_offsets (build o iv r)) 0 = send_offset o iv r p.
Proof. intros. simpl. rewrite nth_map_seq by auto. reflexivity. Qed.

Lemma build_lengths : forall o iv r,
  length (send_offsets (build o iv r)) = length iv /\
  length (input_splits (build o iv r)) = length iv /\
  length (output_splits (build o iv r)) = length iv.
Proof. intros. simpl. rewrite !map_length, !seq_length. auto. Qed.

Lemma send_recv : forall o iv r p, send_count o iv r p = recv_count o iv p r.
Proof.
  intros. unfold send_count, recv_count. rewrite Nat.eqb_sym.
  destruct (Nat.eqb r p); reflexivity.
Qed.

Lemma send_count_nonneg : forall o iv r p, 0 <= send_count o iv r p.
Proof. intros. unfold send_count. destruct (Nat.eqb p r); lia. Qed.

Lemma recv_count_nonneg : forall o iv r p, 0 <= recv_count o iv r p.
Proof. intros. unfold recv_count. destruct (Nat.eqb p r); lia. Qed.

(* ------------------------------------------------------------------------- *)
(* Theorem 1                                                                  *)

Theorem theorem1_send_recv_symmetric : forall o iv r p,
  (r < length iv)%nat -> (p < length iv)%nat ->
  nth p (input_splits (build o iv r)) 0 = nth r (output_splits (build o iv p)) 0 /\
  nth r (input_splits (build o iv r)) 0 = 0 /\
  nth r (output_splits (build o iv r)) 0 = 0 /\
  nth r (send_offsets (build o iv r)) 0 = 0.
Proof.
  intros o iv r p Hr Hp.
  rewrite build_input_splits, build_output_splits, build_input_splits,
          build_output_splits, build_send_offsets by auto.
  unfold send_count, recv_count, send_offset. rewrite Nat.eqb_refl.
  rewrite Nat.eqb_sym. destruct (Nat.eqb r p); auto.
Qed.

(* ------------------------------------------------------------------------- *)
(* Theorem 2                                                                  *)

Lemma needs_exchange_spec : forall o iv,
  needs_exchange o iv = true <->
  exists p, (p < length iv)%nat /\ (ist iv p <> own o p \/ ien iv p <> own o (S p)).
Proof.
  intros. unfold needs_exchange. rewrite existsb_exists. split.
  - intros (p & Hin & Hp). apply in_seq in Hin. exists p. split; [lia|].
    apply negb_true_iff, andb_false_iff in Hp.
    destruct Hp as [Hp | Hp]; apply Z.eqb_neq in Hp; auto.
  - intros (p & Hp & Hne). exists p. split; [apply in_seq; lia|].
    apply negb_true_iff, andb_false_iff.
    destruct Hne; [left | right]; apply Z.eqb_neq; auto.
Qed.

Lemma needs_exchange_false : forall o iv,
  needs_exchange o iv = false ->
  forall p, (p < length iv)%nat -> ist iv p = own o p /\ ien iv p = own o (S p).
Proof.
  intros o iv H p Hp.
  destruct (Z.eq_dec (ist iv p) (own o p)); destruct (Z.eq_dec (ien iv p) (own o (S p)));
    auto; exfalso;
    assert (needs_exchange o iv = true) by (apply needs_exchange_spec; exists p; auto);
    congruence.
Qed.

(* Without exchange nothing moves: every count and offset is 0 and the output starts
   with the own shard. *)
Lemma no_exchange_no_traffic : forall o iv, shared_ok o iv ->
  needs_exchange o iv = false -> forall r p, (r < length iv)%nat -> (p < length iv)%nat ->
  send_count o iv r p = 0 /\ recv_count o iv r p = 0 /\ send_offset o iv r p = 0 /\
  own o r - ist iv r = 0.
Proof.
  intros o iv [Ho Hi] Hne r p Hr Hp.
  assert (Hsend : forall a c, (a < length iv)%nat -> (c < length iv)%nat -> send_count o iv a c = 0).
  { intros a c Ha Hc. unfold send_count. destruct (Nat.eqb c a) eqn:E; auto.
    apply Nat.eqb_neq in E.
    destruct (needs_exchange_false o iv Hne c Hc) as [E1 E2]. rewrite E1, E2.
    destruct (Nat.lt_ge_cases c a).
    - pose proof (own_mono o iv Ho (S c) a ltac:(lia)).
      pose proof (own_mono o iv Ho a (S a) ltac:(lia)). lia.
    - pose proof (own_mono o iv Ho (S a) c ltac:(lia)).
      pose proof (own_mono o iv Ho c (S c) ltac:(lia)). lia. }
  split; [auto|]. split; [rewrite <- send_recv; auto|]. split.
  - unfold send_offset. rewrite (Hsend r p) by auto. destruct (Nat.eqb p r); auto.
  - destruct (needs_exchange_false o iv Hne r Hr). lia.
Qed.

Theorem theorem2_needs_exchange_agrees : forall o iv r p,
  route_needs_exchange (build o iv r) = route_needs_exchange (build o iv p) /\
  (route_needs_exchange (build o iv r) = true <->
   exists q, (q < length iv)%nat /\ nth q iv (0, 0) <> (own o q, own o (S q))).
Proof.
  intros. simpl. split; auto. rewrite needs_exchange_spec.
  unfold ist, ien. split; intros (q & Hq & H); exists q; split; auto.
  - destruct (nth q iv (0, 0)). simpl in *. intro E. inversion E. lia.
  - destruct (nth q iv (0, 0)) as [s e]. simpl.
    destruct (Z.eq_dec s (own o q)); [right | left; auto]. intro. subst. auto.
Qed.

(* ------------------------------------------------------------------------- *)
(* The API level: what interval_route returns                                 *)

Lemma check_shared_spec : forall o iv, check_shared o iv = true <-> shared_ok o iv.
Proof.
  intros. unfold check_shared, shared_ok, owners_ok, intervals_ok.
  rewrite !andb_true_iff, !forallb_forall, Nat.eqb_eq, negb_true_iff, Nat.eqb_neq, Z.eqb_eq.
  split.
  - intros ((((Hl & HP) & H0) & Hm) & Hiv). split; [split; [auto | split; [lia | split; auto]] |].
    + intros p Hp. apply Z.leb_le. apply Hm. apply in_seq. lia.
    + intros p Hp. specialize (Hiv p ltac:(apply in_seq; lia)).
      rewrite !andb_true_iff, !Z.leb_le in Hiv. lia.
  - intros ((Hl & HP & H0 & Hm) & Hiv). repeat split; auto; try lia.
    + intros p Hp. apply in_seq in Hp. apply Z.leb_le. apply Hm. lia.
    + intros p Hp. apply in_seq in Hp. specialize (Hiv p ltac:(lia)).
      rewrite !andb_true_iff, !Z.leb_le. lia.
Qed.

Lemma interval_route_spec : forall L rank iv oo R,
  interval_route L rank iv oo = Some R <->
  0 <= rank /\ route_valid L (Z.to_nat rank) (owners_of L iv oo) iv /\
  R = build (owners_of L iv oo) iv (Z.to_nat rank).
Proof.
  intros. unfold interval_route, route_valid.
  destruct (check_shared (owners_of L iv oo) iv && (0 <=? rank) &&
            (rank <? Z.of_nat (length iv)) &&
            (own (owners_of L iv oo) (S (Z.to_nat rank)) - own (owners_of L iv oo) (Z.to_nat rank) =? L))
    eqn:E.
  - rewrite !andb_true_iff, check_shared_spec, Z.leb_le, Z.ltb_lt, Z.eqb_eq in E.
    destruct E as (((Hs & H0) & Hr) & HL). destruct Hs.
    split; intros Hx.
    + inversion Hx. split; [lia|]. split; [|auto]. split; [auto|]. split; [lia|]. split; auto.
    + destruct Hx as (_ & _ & ->). reflexivity.
  - split; intros H; [discriminate|].
    destruct H as (H0 & (Ho & Hr & Hi & HL) & _).
    assert (check_shared (owners_of L iv oo) iv = true) by (apply check_shared_spec; split; auto).
    rewrite H, (proj2 (Z.leb_le 0 rank) H0), (proj2 (Z.ltb_lt rank _) ltac:(lia)),
            (proj2 (Z.eqb_eq _ _) HL) in E.
    discriminate.
Qed.

Lemma own_default_owners : forall L P p, (p <= P)%nat ->
  own (default_owners L P) p = Z.of_nat p * L.
Proof. intros. unfold own, default_owners. rewrite nth_map_seq by lia. reflexivity. Qed.

(* Two ranks whose interval_route calls (same intervals, same owner argument) both
   succeed use the same owners, even when owners default to p * local_length. *)
Lemma interval_route_same_owners : forall L1 L2 r p iv oo R1 R2,
  interval_route L1 r iv oo = Some R1 -> interval_route L2 p iv oo = Some R2 ->
  owners_of L1 iv oo = owners_of L2 iv oo.
Proof.
  intros L1 L2 r p iv oo R1 R2 H1 H2.
  apply interval_route_spec in H1. apply interval_route_spec in H2.
  destruct oo as [o|]; auto. simpl in *.
  destruct H1 as (_ & ((Hl1 & HP & _) & _ & Hi1 & _) & _).
  destruct H2 as (_ & (_ & _ & Hi2 & _) & _).
  set (P := length iv) in *.
  specialize (Hi1 (pred P) ltac:(lia)). specialize (Hi2 (pred P) ltac:(lia)).
  replace (S (pred P)) with P in * by lia.
  rewrite !own_default_owners in * by lia.
  assert (Z.of_nat P * L1 = Z.of_nat P * L2) by lia.
  assert (L1 = L2) by nia. subst. reflexivity.
Qed.

(* When every rank's interval_route call succeeds (same intervals, same owner
   argument), the owners of any one rank r serve all ranks: they pass the shared checks
   and rank q's route is build o iv q. *)
Lemma interval_routes_build : forall (L : nat -> Z) iv oo (R : nat -> route) r,
  (forall q, (q < length iv)%nat -> interval_route (L q) (Z.of_nat q) iv oo = Some (R q)) ->
  (r < length iv)%nat ->
  shared_ok (owners_of (L r) iv oo) iv /\
  (forall q, (q < length iv)%nat -> R q = build (owners_of (L r) iv oo) iv q).
Proof.
  intros L iv oo R r HR Hr.
  assert (Hall : forall q, (q < length iv)%nat ->
            route_valid (L q) q (owners_of (L r) iv oo) iv /\
            R q = build (owners_of (L r) iv oo) iv q).
  { intros q Hq. pose proof (HR q Hq) as Hq'.
    pose proof (interval_route_same_owners _ _ _ _ _ _ _ _ Hq' (HR r Hr)) as Eo.
    apply interval_route_spec in Hq'. rewrite Nat2Z.id, Eo in Hq'. apply Hq'. }
  destruct (Hall r Hr) as ((Ho & _ & Hi & _) & _).
  split; [split; auto | intros; apply Hall; auto].
Qed.

Theorem theorem1_api : forall L1 L2 r p iv oo R1 R2,
  interval_route L1 r iv oo = Some R1 -> interval_route L2 p iv oo = Some R2 ->
  nth (Z.to_nat p) (input_splits R1) 0 = nth (Z.to_nat r) (output_splits R2) 0 /\
  nth (Z.to_nat r) (input_splits R1) 0 = 0 /\ nth (Z.to_nat r) (output_splits R1) 0 = 0 /\
  nth (Z.to_nat r) (send_offsets R1) 0 = 0.
Proof.
  intros L1 L2 r p iv oo R1 R2 H1 H2.
  pose proof (interval_route_same_owners _ _ _ _ _ _ _ _ H1 H2) as Eo.
  apply interval_route_spec in H1. apply interval_route_spec in H2.
  destruct H1 as (_ & (_ & Hr & _) & ->). destruct H2 as (_ & (_ & Hp & _) & ->).
  rewrite <- Eo. apply theorem1_send_recv_symmetric; auto.
Qed.

Theorem theorem2_api : forall L1 L2 r p iv oo R1 R2,
  interval_route L1 r iv oo = Some R1 -> interval_route L2 p iv oo = Some R2 ->
  route_needs_exchange R1 = route_needs_exchange R2.
Proof.
  intros L1 L2 r p iv oo R1 R2 H1 H2.
  pose proof (interval_route_same_owners _ _ _ _ _ _ _ _ H1 H2) as Eo.
  apply interval_route_spec in H1. apply interval_route_spec in H2.
  destruct H1 as (_ & _ & ->). destruct H2 as (_ & _ & ->).
  rewrite <- Eo. apply theorem2_needs_exchange_agrees.
Qed.
