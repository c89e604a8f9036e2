(* Theorem 3: the forward dispatch (SPEC 8.1) assembles exactly rows
   [global_start, global_end) of the global bank, and local_output_start is the number of
   rows received from lower peers. *)

From Coq Require Import ZArith Lia List Bool.
From Hpref Require Import Model Lib Symmetry.
Import ListNotations.
Open Scope Z_scope.

(* The local shard of rank q: rows [owners[q], owners[q+1]) of the global bank. *)
Definition shard {A : Type} (o : list Z) (x : list A) (q : nat) : list A :=
  slice (own o q) (own o (S q)) x.

(* What rank q sends to peer p: rows [offset, offset + count) of its shard. *)
Definition message {A : Type} (o : list Z) (iv : list (Z * Z)) (x : list A) (q p : nat) : list A :=
  slice (send_offset o iv q p) (send_offset o iv q p + send_count o iv q p) (shard o x q).

Section Counts.
Variables (o : list Z) (iv : list (Z * Z)).
Hypothesis Hok : shared_ok o iv.

Local Notation P := (length iv).

Lemma interval_facts : forall p, (p < P)%nat ->
  0 <= ist iv p /\ ist iv p <= own o p /\ own o p <= own o (S p) /\
  own o (S p) <= ien iv p /\ ien iv p <= own o P.
Proof. intros. apply (proj2 Hok). auto. Qed.

Lemma own_le : forall i j, (i <= j <= P)%nat -> own o i <= own o j.
Proof. intros. apply (own_mono o iv (proj1 Hok)). auto. Qed.

Lemma own_0 : own o 0 = 0.
Proof. destruct Hok as ((_ & _ & H & _) & _). auto. Qed.

(* the send range lies inside the sender's shard *)
Lemma send_range : forall q p, (q < P)%nat ->
  0 <= send_offset o iv q p /\
  send_offset o iv q p + send_count o iv q p <= own o (S q) - own o q.
Proof.
  intros q p Hq. pose proof (own_le q (S q) ltac:(lia)).
  unfold send_offset, send_count.
  destruct (Nat.eqb p q); [lia|].
  destruct (0 <? Z.max 0 (Z.min (own o (S q)) (ien iv p) - Z.max (own o q) (ist iv p))) eqn:E;
    [apply Z.ltb_lt in E | apply Z.ltb_ge in E]; lia.
Qed.

Lemma send_global_start : forall q p,
  own o q + send_offset o iv q p = Z.max (own o q) (ist iv p) \/ send_count o iv q p = 0.
Proof.
  intros. unfold send_offset.
  destruct (Nat.eqb p q) eqn:Epq.
  { right. unfold send_count. rewrite Epq. reflexivity. }
  destruct (0 <? send_count o iv q p) eqn:E.
  - left. lia.
  - right. apply Z.ltb_ge in E. pose proof (send_count_nonneg o iv q p). lia.
Qed.

(* lower senders: piece [max(owners[q], start_r), max(owners[q+1], start_r)) *)
Definition lo_edge (r q : nat) : Z := Z.max (own o q) (ist iv r).
(* higher senders: piece [min(owners[q], end_r), min(owners[q+1], end_r)) *)
Definition hi_edge (r q : nat) : Z := Z.min (own o q) (ien iv r).

Lemma count_lower : forall r q, (r < P)%nat -> (q < r)%nat ->
  send_count o iv q r = lo_edge r (S q) - lo_edge r q.
Proof.
  intros r q Hr Hq. unfold send_count, lo_edge.
  destruct (Nat.eqb r q) eqn:E; [apply Nat.eqb_eq in E; lia|].
  pose proof (interval_facts r Hr). pose proof (own_le q (S q) ltac:(lia)).
  pose proof (own_le (S q) r ltac:(lia)). lia.
Qed.

Lemma count_higher : forall r q, (r < P)%nat -> (r < q < P)%nat ->
  send_count o iv q r = hi_edge r (S q) - hi_edge r q.
Proof.
  intros r q Hr Hq. unfold send_count, hi_edge.
  destruct (Nat.eqb r q) eqn:E; [apply Nat.eqb_eq in E; lia|].
  pose proof (interval_facts r Hr). pose proof (own_le q (S q) ltac:(lia)).
  pose proof (own_le (S r) q ltac:(lia)). lia.
Qed.

Lemma count_self : forall r, send_count o iv r r = 0.
Proof. intros. unfold send_count. rewrite Nat.eqb_refl. auto. Qed.

(* local_output_start = the rows received from lower peers *)
Lemma los_received_lower : forall r, (r < P)%nat ->
  own o r - ist iv r = sumZ (firstn r (output_splits (build o iv r))).
Proof.
  intros r Hr. simpl. rewrite firstn_map.
  rewrite firstn_seq by lia.
  rewrite sumZ_map_ext with (g := fun q => lo_edge r (S q) - lo_edge r q).
  - rewrite sumZ_telescope. simpl. unfold lo_edge. rewrite own_0.
    pose proof (interval_facts r Hr). lia.
  - intros q Hq. apply in_seq in Hq. rewrite <- send_recv. apply count_lower; lia.
Qed.

End Counts.

(* What a rank sends, for any local inputs of the right lengths: the forward pass of
   Theorem 3 (shards of one bank) and of Theorem 5 (arbitrary inputs) both use this. *)
Section Messages.
Context {A : Type}.
Variables (o : list Z) (iv : list (Z * Z)).
Hypothesis Hok : shared_ok o iv.

Local Notation P := (length iv).

(* Rows [offset, offset + count) that rank q sends to peer p out of its local input l. *)
Lemma send_slice_length : forall q p (l : list A), (q < P)%nat ->
  Z.of_nat (length l) = own o (S q) - own o q ->
  Z.of_nat (length (slice (send_offset o iv q p) (send_offset o iv q p + send_count o iv q p) l)) =
  send_count o iv q p.
Proof.
  intros q p l Hq Hl. pose proof (send_range o iv Hok q p Hq).
  pose proof (send_count_nonneg o iv q p).
  rewrite slice_length by lia. lia.
Qed.

(* Rank r receives, in peer order, the rows every rank q sends it. *)
Lemma received_slices : forall (l : nat -> list A) r,
  (forall q, (q < P)%nat -> Z.of_nat (length (l q)) = own o (S q) - own o q) -> (r < P)%nat ->
  all_to_all_v P (fun q => pack (build o iv q) (l q)) (fun q => input_splits (build o iv q)) r =
  concat (map (fun q => slice (send_offset o iv q r) (send_offset o iv q r + send_count o iv q r) (l q))
              (seq 0 P)).
Proof.
  intros l r Hl Hr. unfold all_to_all_v. f_equal. apply map_ext_in. intros q Hq. apply in_seq in Hq.
  unfold pack. rewrite (proj1 (proj2 (build_lengths o iv q))).
  rewrite (map_ext_in _ (fun p => slice (send_offset o iv q p)
                                        (send_offset o iv q p + send_count o iv q p) (l q))).
  2:{ intros p Hp. apply in_seq in Hp.
      rewrite build_send_offsets, build_input_splits by lia. reflexivity. }
  simpl input_splits.
  apply (chunk_concat_seq (fun p => slice (send_offset o iv q p)
                                          (send_offset o iv q p + send_count o iv q p) (l q))); auto.
  intros. apply send_slice_length; [lia | apply Hl; lia].
Qed.

End Messages.

Section Assembly.
Context {A : Type}.
Variables (o : list Z) (iv : list (Z * Z)) (x : list A).
Hypothesis Hok : shared_ok o iv.
Hypothesis Hx : Z.of_nat (length x) = own o (length iv).

Local Notation P := (length iv).

Lemma shard_length : forall q, (q < P)%nat ->
  Z.of_nat (length (shard o x q)) = own o (S q) - own o q.
Proof.
  intros. unfold shard. pose proof (own_le o iv Hok q (S q) ltac:(lia)).
  pose proof (own_le o iv Hok (S q) P ltac:(lia)). pose proof (own_le o iv Hok 0 q ltac:(lia)).
  rewrite (own_0 o iv Hok) in *.
  rewrite slice_length by lia. lia.
Qed.

Lemma message_length : forall q p, (q < P)%nat ->
  Z.of_nat (length (message o iv x q p)) = send_count o iv q p.
Proof. intros. apply send_slice_length; auto. apply shard_length. auto. Qed.

Lemma message_global : forall q p, (q < P)%nat ->
  message o iv x q p =
  slice (Z.max (own o q) (ist iv p)) (Z.max (own o q) (ist iv p) + send_count o iv q p) x.
Proof.
  intros q p Hq. unfold message, shard.
  pose proof (send_range o iv Hok q p Hq). pose proof (send_count_nonneg o iv q p).
  pose proof (own_le o iv Hok 0 q ltac:(lia)). rewrite (own_0 o iv Hok) in *.
  rewrite slice_slice by lia.
  destruct (send_global_start o iv q p) as [E | E].
  - rewrite E. reflexivity.
  - rewrite E, !Z.add_0_r, !slice_empty by lia. reflexivity.
Qed.

Lemma received_messages : forall r, (r < P)%nat ->
  all_to_all_v P (fun q => pack (build o iv q) (shard o x q))
               (fun q => input_splits (build o iv q)) r =
  concat (map (fun q => message o iv x q r) (seq 0 P)).
Proof. intros. apply received_slices; auto. apply shard_length. Qed.

Lemma received_global : forall r, (r < P)%nat ->
  concat (map (fun q => message o iv x q r) (seq 0 P)) =
  slice (ist iv r) (own o r) x ++ slice (own o (S r)) (ien iv r) x.
Proof.
  intros r Hr. pose proof (interval_facts o iv Hok r Hr) as Hi.
  replace P with (r + (1 + (P - S r)))%nat by lia.
  rewrite !seq_app, !map_app, !concat_app. simpl.
  replace (r + 1)%nat with (S r) by lia.
  rewrite message_global, count_self by auto. rewrite Z.add_0_r, slice_empty by lia. simpl.
  (* lower peers *)
  rewrite map_ext_in with (g := fun q => slice (lo_edge o iv r q) (lo_edge o iv r (S q)) x).
  2:{ intros q Hq. apply in_seq in Hq. rewrite message_global by lia.
      rewrite count_lower by (auto; lia). unfold lo_edge.
      f_equal. lia. }
  rewrite slice_concat_telescope.
  2:{ unfold lo_edge. lia. }
  2:{ intros q Hq. unfold lo_edge. pose proof (own_le o iv Hok q (S q) ltac:(lia)). lia. }
  (* higher peers *)
  rewrite map_ext_in with (g := fun q => slice (hi_edge o iv r q) (hi_edge o iv r (S q)) x).
  2:{ intros q Hq. apply in_seq in Hq. rewrite message_global by lia.
      rewrite count_higher by (auto; lia). unfold hi_edge.
      pose proof (own_le o iv Hok (S r) q ltac:(lia)).
      pose proof (own_le o iv Hok q (S q) ltac:(lia)).
      destruct (Z_lt_le_dec (own o q) (ien iv r)).
      - f_equal; lia.
      - rewrite !slice_empty by lia. reflexivity. }
  rewrite slice_concat_telescope.
  2:{ unfold hi_edge. lia. }
  2:{ intros q Hq. unfold hi_edge. pose proof (own_le o iv Hok q (S q) ltac:(lia)). lia. }
  replace (S r + (P - S r))%nat with P by lia.
  unfold lo_edge, hi_edge. rewrite (own_0 o iv Hok), Nat.add_0_l.
  f_equal; f_equal; lia.
Qed.

Lemma forward_exact : forall r, (r < P)%nat ->
  forward P (build o iv) (shard o x) r = slice (ist iv r) (ien iv r) x.
Proof.
  intros r Hr. pose proof (interval_facts o iv Hok r Hr) as Hi.
  pose proof (own_le o iv Hok (S r) P ltac:(lia)).
  unfold forward, assemble. simpl route_needs_exchange.
  destruct (needs_exchange o iv) eqn:Ene.
  - rewrite received_messages, received_global by auto. simpl local_output_start.
    rewrite firstn_app_exact, skipn_app_exact by (rewrite slice_length; lia).
    unfold shard. rewrite !slice_app by lia. reflexivity.
  - destruct (needs_exchange_false o iv Ene r Hr) as [E1 E2]. unfold shard. rewrite E1, E2.
    reflexivity.
Qed.

End Assembly.

Lemma forward_ext : forall (A : Type) P (R1 R2 : nat -> route) (l1 l2 : nat -> list A) r,
  (forall q, (q < P)%nat -> R1 q = R2 q) -> (forall q, (q < P)%nat -> l1 q = l2 q) ->
  (r < P)%nat -> forward P R1 l1 r = forward P R2 l2 r.
Proof.
  intros A P R1 R2 l1 l2 r HR Hl Hr. unfold forward, all_to_all_v.
  rewrite HR, Hl by auto. f_equal. f_equal. apply map_ext_in.
  intros q Hq. apply in_seq in Hq. rewrite HR, Hl by lia. reflexivity.
Qed.

(* ------------------------------------------------------------------------- *)
(* Theorem 3                                                                  *)

Theorem theorem3_assembly_exact : forall (A : Type) o iv (x : list A) r,
  shared_ok o iv -> Z.of_nat (length x) = own o (length iv) -> (r < length iv)%nat ->
  forward (length iv) (build o iv) (fun q => slice (own o q) (own o (S q)) x) r =
    slice (global_start (build o iv r)) (global_end (build o iv r)) x /\
  Z.of_nat (length (slice (global_start (build o iv r)) (global_end (build o iv r)) x)) =
    global_end (build o iv r) - global_start (build o iv r) /\
  local_output_start (build o iv r) = sumZ (firstn r (output_splits (build o iv r))).
Proof.
  intros A o iv x r Hok Hx Hr. split; [|split].
  - apply (forward_exact o iv x Hok Hx r Hr).
  - simpl. pose proof (interval_facts o iv Hok r Hr).
    rewrite slice_length; lia.
  - apply los_received_lower; auto.
Qed.

(* The same for the routes interval_route returns: when every rank's call succeeds
   (same intervals and owner argument), each rank's assembled output is rows
   [global_start, global_end) of the bank, whose shards are rows
   [global_start + local_output_start, + local_length) (oracle.cpp: route_owner_offsets). *)
Theorem theorem3_api : forall (A : Type) (L : nat -> Z) iv oo (R : nat -> route) (x : list A),
  (forall q, (q < length iv)%nat -> interval_route (L q) (Z.of_nat q) iv oo = Some (R q)) ->
  Z.of_nat (length x) = global_end (R (pred (length iv))) ->
  forall r, (r < length iv)%nat ->
  forward (length iv) R
    (fun q => slice (global_start (R q) + local_output_start (R q))
                    (global_start (R q) + local_output_start (R q) + local_length (R q)) x) r =
  slice (global_start (R r)) (global_end (R r)) x /\
  local_output_start (R r) = sumZ (firstn r (output_splits (R r))).
Proof.
  intros A L iv oo R x HR Hx r Hr.
  destruct (interval_routes_build L iv oo R r HR Hr) as [Hok HR'].
  set (o := owners_of (L r) iv oo) in *.
  assert (Hx' : Z.of_nat (length x) = own o (length iv)).
  { rewrite Hx, HR' by lia. simpl. pose proof (proj2 Hok (pred (length iv)) ltac:(lia)).
    replace (S (pred (length iv))) with (length iv) in * by lia. lia. }
  assert (Eloc : forall q, (q < length iv)%nat ->
     slice (global_start (R q) + local_output_start (R q))
           (global_start (R q) + local_output_start (R q) + local_length (R q)) x =
     slice (own o q) (own o (S q)) x).
  { intros q Hq. rewrite HR' by auto. simpl. f_equal; lia. }
  assert (Ef : forward (length iv) R
    (fun q => slice (global_start (R q) + local_output_start (R q))
                    (global_start (R q) + local_output_start (R q) + local_length (R q)) x) r =
               forward (length iv) (build o iv) (fun q => slice (own o q) (own o (S q)) x) r).
  { apply forward_ext; auto. }
  rewrite Ef, HR' by auto.
  destruct (theorem3_assembly_exact A o iv x r Hok Hx' Hr) as (H1 & _ & H3). auto.
Qed.
