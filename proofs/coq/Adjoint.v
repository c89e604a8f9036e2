From Hpref Require Import Model Lib Symmetry Assembly.
From Coq Require Import ZArith Lia List Bool.
Import ListNotations.
Open Scope Z_scope.

(* Theorem 5: the backward dispatch (SPEC 8.2) is the adjoint of the forward dispatch
   (SPEC 8.1) over the integers, <forward x, g> = <x, backward g>, and, equivalently,
   backward is the transpose of the gather: every owner row collects the gradient of
   every output row that copied it. *)

(* ------------------------------------------------------------------------- *)
(* Generic lemmas                                                             *)

Lemma sumZ_cons : forall a l, sumZ (a :: l) = a + sumZ l.
Proof. reflexivity. Qed.

Lemma map_seq_S0 : forall {B : Type} (f : nat -> B) n,
  map f (seq 0 (S n)) = f 0%nat :: map (fun i => f (S i)) (seq 0 n).
Proof. intros. simpl. rewrite <- seq_shift, map_map. reflexivity. Qed.

(* dot of pieces laid end to end against a buffer = sum of dots of each piece with the
   matching chunk of the buffer. *)
Lemma dot_concat_chunks : forall n (pc : nat -> list Z) (c : nat -> Z) buf,
  (forall i, (i < n)%nat -> Z.of_nat (length (pc i)) = c i) ->
  dot (concat (map pc (seq 0 n))) buf =
  sumZ (map (fun i => dot (pc i) (chunk i (map c (seq 0 n)) buf)) (seq 0 n)).
Proof.
  induction n as [| n IH]; intros pc c buf H; [reflexivity|].
  rewrite !map_seq_S0. simpl concat. rewrite sumZ_cons.
  set (cs := map (fun i => c (S i)) (seq 0 n)).
  assert (Hc0 : 0 <= c 0%nat) by (rewrite <- H by lia; lia).
  assert (Hcs : Forall (fun x => 0 <= x) cs).
  { apply Forall_forall. intros x Hx. unfold cs in Hx. apply in_map_iff in Hx.
    destruct Hx as (i & <- & Hi). apply in_seq in Hi. rewrite <- H by lia. lia. }
  assert (Hl0 : length (pc 0%nat) = Z.to_nat (c 0%nat)) by (rewrite <- H by lia; lia).
  rewrite dot_app_firstn, Hl0, chunk_0 by auto.
  rewrite (map_ext_in (fun i => dot (pc (S i)) (chunk (S i) (c 0%nat :: cs) buf))
                      (fun i => dot (pc (S i)) (chunk i cs (skipn (Z.to_nat (c 0%nat)) buf)))).
  2:{ intros k _. rewrite chunk_S by auto. reflexivity. }
  rewrite (IH (fun i => pc (S i)) (fun i => c (S i))).
  - reflexivity.
  - intros. apply H. lia.
Qed.

(* A chunk of a long enough buffer has its count as length. *)
Lemma chunk_length_le_sum : forall counts (buf : list Z) k,
  Forall (fun x => 0 <= x) counts -> sumZ counts <= Z.of_nat (length buf) ->
  (k < length counts)%nat -> Z.of_nat (length (chunk k counts buf)) = nth k counts 0.
Proof.
  induction counts as [| c cs IH]; intros buf k Hnn Hs Hk; simpl in Hk; [lia|].
  inversion Hnn; subst. rewrite sumZ_cons in Hs.
  pose proof (sumZ_nonneg cs H2).
  destruct k as [| k].
  - rewrite chunk_0 by auto. rewrite firstn_length, Nat.min_l by lia. simpl. lia.
  - rewrite chunk_S by auto. simpl nth. apply IH; auto; [rewrite skipn_length | ]; lia.
Qed.

Lemma length_fold_add_at : forall (off : nat -> Z) (rows : nat -> list Z) l base,
  length (fold_left (fun acc p => add_at (off p) (rows p) acc) l base) = length base.
Proof.
  induction l as [| p l IH]; intros base; simpl; auto. rewrite IH, length_add_at. auto.
Qed.

(* A sum over 0..n-1 is its q-th term plus the sum of the others. *)
Lemma sumZ_single : forall (f : nat -> Z) n q, (q < n)%nat ->
  sumZ (map f (seq 0 n)) = f q + sumZ (map (fun r => if Nat.eqb r q then 0 else f r) (seq 0 n)).
Proof.
  induction n as [| n IH]; intros q Hq; [lia|].
  rewrite seq_S, !map_app, !sumZ_app. simpl. 
  destruct (Nat.eq_dec q n) as [-> | Hne].
  - rewrite Nat.eqb_refl.
    rewrite (sumZ_map_ext _ (fun r => if Nat.eqb r n then 0 else f r) f); [lia|].
    intros r Hr. apply in_seq in Hr. destruct (Nat.eqb_spec r n); [lia | auto].
  - rewrite (IH q) by lia. destruct (Nat.eqb_spec n q); [lia|]. lia.
Qed.

(* ------------------------------------------------------------------------- *)
(* The adjoint identity for arbitrary local inputs and output gradients       *)

Section Adjoint.
Variables (o : list Z) (iv : list (Z * Z)).
Hypothesis Hok : shared_ok o iv.

Local Notation P := (length iv).
Local Notation B := (build o iv).

Variables (xs g : nat -> list Z).
Hypothesis Hxs : forall q, (q < P)%nat -> Z.of_nat (length (xs q)) = own o (S q) - own o q.
Hypothesis Hg : forall r, (r < P)%nat -> Z.of_nat (length (g r)) = ien iv r - ist iv r.

(* What rank q sends to peer p in the forward pass: rows [offset, offset + count) of
   its local input. *)
Definition msg (q p : nat) : list Z :=
  slice (send_offset o iv q p) (send_offset o iv q p + send_count o iv q p) (xs q).

(* What rank r sends back to owner q in the backward pass: the q-th piece of r's
   backward send buffer, cut by r's output splits. *)
Definition bpiece (q r : nat) : list Z :=
  chunk q (output_splits (B r)) (backward_sendbuf (B r) (g r)).

Lemma msg_length : forall q p, (q < P)%nat -> Z.of_nat (length (msg q p)) = send_count o iv q p.
Proof. intros. apply send_slice_length; auto. Qed.

Lemma recv_fwd : forall r, (r < P)%nat ->
  all_to_all_v P (fun q => pack (B q) (xs q)) (fun q => input_splits (B q)) r =
  concat (map (fun q => msg q r) (seq 0 P)).
Proof. intros. apply received_slices; auto. Qed.

(* Every rank receives, in total, the rows of its interval outside its own shard. *)
Lemma total_recv : forall r, (r < P)%nat ->
  sumZ (map (fun q => send_count o iv q r) (seq 0 P)) =
  (own o r - ist iv r) + (ien iv r - own o (S r)).
Proof.
  intros r Hr.
  set (x0 := repeat 0 (Z.to_nat (own o P))).
  pose proof (own_le o iv Hok 0 P ltac:(lia)). rewrite (own_0 o iv Hok) in H.
  assert (Hx0 : Z.of_nat (length x0) = own o P) by (unfold x0; rewrite repeat_length; lia).
  pose proof (received_global o iv x0 Hok r Hr) as E.
  apply (f_equal (fun l => Z.of_nat (length l))) in E.
  rewrite length_concat_seq, app_length, Nat2Z.inj_add in E.
  rewrite (sumZ_map_ext _ _ (fun q => send_count o iv q r)) in E.
  2:{ intros q Hq. apply in_seq in Hq. apply message_length; auto. lia. }
  pose proof (interval_facts o iv Hok r Hr).
  rewrite !slice_length in E by lia. lia.
Qed.

Lemma recv_fwd_length : forall r, (r < P)%nat ->
  Z.of_nat (length (concat (map (fun q => msg q r) (seq 0 P)))) =
  (own o r - ist iv r) + (ien iv r - own o (S r)).
Proof.
  intros r Hr. rewrite length_concat_seq, <- total_recv by auto.
  apply sumZ_map_ext. intros q Hq. apply in_seq in Hq. apply msg_length. lia.
Qed.

Lemma sendbuf_length : forall r, (r < P)%nat ->
  Z.of_nat (length (backward_sendbuf (B r) (g r))) =
  (own o r - ist iv r) + (ien iv r - own o (S r)).
Proof.
  intros r Hr. pose proof (interval_facts o iv Hok r Hr). pose proof (Hg r Hr).
  unfold backward_sendbuf. simpl local_output_start. simpl local_length.
  rewrite app_length, firstn_length, skipn_length, Nat.min_l by lia. lia.
Qed.

Lemma sum_output_splits : forall r, (r < P)%nat ->
  sumZ (output_splits (B r)) = (own o r - ist iv r) + (ien iv r - own o (S r)).
Proof.
  intros r Hr. simpl output_splits. rewrite <- total_recv by auto.
  apply sumZ_map_ext. intros q _. symmetry. apply send_recv.
Qed.

Lemma bpiece_length : forall q r, (q < P)%nat -> (r < P)%nat ->
  Z.of_nat (length (bpiece q r)) = send_count o iv q r.
Proof.
  intros q r Hq Hr. unfold bpiece.
  rewrite chunk_length_le_sum.
  - rewrite build_output_splits by auto. symmetry. apply send_recv.
  - simpl output_splits. apply Forall_forall. intros c Hc. apply in_map_iff in Hc.
    destruct Hc as (p & <- & _). apply recv_count_nonneg.
  - rewrite sum_output_splits, sendbuf_length by auto. lia.
  - rewrite (proj2 (proj2 (build_lengths o iv r))). auto.
Qed.

Lemma own_block_length : forall r, (r < P)%nat ->
  Z.of_nat (length (own_block (B r) (g r))) = own o (S r) - own o r.
Proof.
  intros r Hr. pose proof (interval_facts o iv Hok r Hr). pose proof (Hg r Hr).
  unfold own_block. simpl local_output_start. simpl local_length.
  rewrite slice_length by lia. lia.
Qed.

(* Forward side: <forward_r, g_r> = <x_r, own block of g_r> + sum over senders q of
   <message q -> r, the piece of g_r that r sends back to q>. *)
Lemma forward_dot : forall r, (r < P)%nat -> needs_exchange o iv = true ->
  dot (forward P B xs r) (g r) =
  dot (xs r) (own_block (B r) (g r)) + sumZ (map (fun q => dot (msg q r) (bpiece q r)) (seq 0 P)).
Proof.
  intros r Hr Hne. pose proof (interval_facts o iv Hok r Hr) as Hi.
  pose proof (Hg r Hr) as Hgr. pose proof (Hxs r Hr) as Hxr.
  unfold forward, assemble. simpl route_needs_exchange. rewrite Hne.
  rewrite recv_fwd by auto. pose proof (recv_fwd_length r Hr) as Hlen.
  set (rv := concat (map (fun q => msg q r) (seq 0 P))) in *.
  simpl local_output_start.
  set (n := Z.to_nat (own o r - ist iv r)).
  assert (Hn : length (firstn n rv) = n) by (rewrite firstn_length; lia).
  rewrite dot_app_firstn, Hn, dot_app_firstn.
  assert (Hsum : sumZ (map (fun q => dot (msg q r) (bpiece q r)) (seq 0 P)) =
                 dot rv (backward_sendbuf (B r) (g r))).
  { unfold rv, bpiece. simpl output_splits. rewrite dot_concat_chunks with (c := recv_count o iv r).
    - reflexivity.
    - intros i Hi'. rewrite msg_length by auto. apply send_recv. }
  rewrite Hsum. unfold backward_sendbuf, own_block, slice. simpl local_output_start.
  simpl local_length. fold n.
  rewrite <- (firstn_skipn n rv) at 3.
  rewrite dot_app by (rewrite !firstn_length; lia).
  replace (Z.to_nat (own o r - ist iv r + (own o (S r) - own o r) - (own o r - ist iv r)))
    with (length (xs r)) by lia.
  replace (Z.to_nat (own o r - ist iv r + (own o (S r) - own o r)))
    with (length (xs r) + n)%nat by lia.
  rewrite skipn_skipn. lia.
Qed.

(* The rows owner q receives in the backward pass, cut by its forward send counts, are
   the pieces every peer sent back. *)
Lemma recv_bwd_chunk : forall q p, (q < P)%nat -> (p < P)%nat ->
  chunk p (input_splits (B q))
        (all_to_all_v P (fun r => backward_sendbuf (B r) (g r)) (fun r => output_splits (B r)) q) =
  bpiece q p.
Proof.
  intros q p Hq Hp. unfold all_to_all_v. simpl input_splits.
  apply (chunk_concat_seq (fun r => bpiece q r)); auto.
  intros i Hi. apply bpiece_length; auto.
Qed.

(* Backward side: <x_q, backward_q> = <x_q, own block of g_q> + sum over peers p of
   <message q -> p, the piece p sends back to q>. *)
Lemma backward_dot : forall q, (q < P)%nat -> needs_exchange o iv = true ->
  dot (xs q) (backward P B g q) =
  dot (xs q) (own_block (B q) (g q)) + sumZ (map (fun p => dot (msg q p) (bpiece q p)) (seq 0 P)).
Proof.
  intros q Hq Hne. unfold backward. simpl route_needs_exchange. rewrite Hne.
  unfold unpack_add. rewrite (proj1 (proj2 (build_lengths o iv q))).
  pose proof (own_block_length q Hq) as Hob. pose proof (Hxs q Hq) as Hxq.
  rewrite dot_fold_add_at.
  - f_equal. apply sumZ_map_ext. intros p Hp. apply in_seq in Hp.
    rewrite recv_bwd_chunk, bpiece_length, build_send_offsets by lia. reflexivity.
  - lia.
  - intros p Hp. apply in_seq in Hp.
    rewrite recv_bwd_chunk, bpiece_length, build_send_offsets by lia.
    pose proof (send_range o iv Hok q p Hq). lia.
Qed.

(* Without exchange the own block is the whole gradient. *)
Lemma own_block_all : forall r, (r < P)%nat -> needs_exchange o iv = false ->
  own_block (B r) (g r) = g r.
Proof.
  intros r Hr Hne. pose proof (Hg r Hr) as Hgr.
  destruct (needs_exchange_false o iv Hne r Hr) as [E1 E2].
  unfold own_block. simpl local_output_start. simpl local_length.
  replace (own o r - ist iv r) with 0 by lia.
  replace (0 + (own o (S r) - own o r)) with (Z.of_nat (length (g r))) by lia.
  apply slice_all.
Qed.

Lemma adjoint_sum :
  sumZ (map (fun r => dot (forward P B xs r) (g r)) (seq 0 P)) =
  sumZ (map (fun q => dot (xs q) (backward P B g q)) (seq 0 P)).
Proof.
  destruct (needs_exchange o iv) eqn:Hne.
  - rewrite (sumZ_map_ext _ _ (fun r => dot (xs r) (own_block (B r) (g r)) +
                                        sumZ (map (fun q => dot (msg q r) (bpiece q r)) (seq 0 P)))).
    2:{ intros r Hr. apply in_seq in Hr. apply forward_dot; auto. lia. }
    rewrite (sumZ_map_ext _ (fun q => dot (xs q) (backward P B g q))
                          (fun q => dot (xs q) (own_block (B q) (g q)) +
                                    sumZ (map (fun p => dot (msg q p) (bpiece q p)) (seq 0 P)))).
    2:{ intros q Hq. apply in_seq in Hq. apply backward_dot; auto. lia. }
    rewrite !sumZ_map_add. f_equal.
    exact (sumZ_swap _ _ (fun r q => dot (msg q r) (bpiece q r)) (seq 0 P) (seq 0 P)).
  - apply sumZ_map_ext. intros r Hr. apply in_seq in Hr.
    unfold forward, backward, assemble. simpl route_needs_exchange. rewrite Hne.
    rewrite own_block_all by (auto; lia). reflexivity.
Qed.

Lemma backward_length : forall q, (q < P)%nat ->
  Z.of_nat (length (backward P B g q)) = own o (S q) - own o q.
Proof.
  intros q Hq. unfold backward. simpl route_needs_exchange.
  destruct (needs_exchange o iv).
  - unfold unpack_add. rewrite length_fold_add_at. apply own_block_length; auto.
  - apply own_block_length; auto.
Qed.

Lemma forward_length : forall r, (r < P)%nat ->
  Z.of_nat (length (forward P B xs r)) = ien iv r - ist iv r.
Proof.
  intros r Hr. pose proof (interval_facts o iv Hok r Hr) as Hi. pose proof (Hxs r Hr).
  unfold forward, assemble. simpl route_needs_exchange.
  destruct (needs_exchange o iv) eqn:Hne.
  - rewrite recv_fwd by auto. pose proof (recv_fwd_length r Hr) as Hlen.
    simpl local_output_start.
    rewrite !app_length, firstn_length, skipn_length, Nat.min_l by lia. lia.
  - destruct (needs_exchange_false o iv Hne r Hr) as [E1 E2]. lia.
Qed.

End Adjoint.

(* ------------------------------------------------------------------------- *)
(* Theorem 5                                                                  *)

(* In words: take valid shared owners and intervals (every rank's route is build o iv q),
   ANY local input x_q of local_length rows on every rank q, and ANY output gradient g_r
   of global_end - global_start rows on every rank r.  Then the sum over ranks of
   <forward output of r, g_r> equals the sum over ranks of <x_q, backward result of q>:
   backward is the adjoint of forward, exactly, over the integers (SPEC 8.2).  Also,
   backward's result on rank q has local_length rows (it lies in the input space) and
   forward's output on rank r has global_end - global_start rows (the output space). *)
Theorem theorem5_backward_adjoint : forall o iv (xs g : nat -> list Z),
  shared_ok o iv ->
  (forall q, (q < length iv)%nat -> Z.of_nat (length (xs q)) = local_length (build o iv q)) ->
  (forall r, (r < length iv)%nat ->
     Z.of_nat (length (g r)) = global_end (build o iv r) - global_start (build o iv r)) ->
  sumZ (map (fun r => dot (forward (length iv) (build o iv) xs r) (g r)) (seq 0 (length iv))) =
  sumZ (map (fun q => dot (xs q) (backward (length iv) (build o iv) g q)) (seq 0 (length iv))) /\
  (forall q, (q < length iv)%nat ->
     Z.of_nat (length (backward (length iv) (build o iv) g q)) = local_length (build o iv q)) /\
  (forall r, (r < length iv)%nat ->
     Z.of_nat (length (forward (length iv) (build o iv) xs r)) =
       global_end (build o iv r) - global_start (build o iv r)).
Proof.
  intros o iv xs g Hok Hxs Hg. simpl in Hxs, Hg. split; [|split].
  - apply adjoint_sum; auto.
  - intros q Hq. simpl local_length. apply backward_length; auto.
  - intros r Hr. simpl global_end. simpl global_start. apply forward_length; auto.
Qed.

(* ------------------------------------------------------------------------- *)
(* Backward as the transpose of the gather                                    *)

(* The global bank with a single 1 at row j. *)
Definition unit_row (N j : nat) : list Z := map (fun k => if Nat.eqb k j then 1 else 0) (seq 0 N).

Lemma dot_unit_seq : forall n s j v,
  dot (map (fun k => if Nat.eqb k j then 1 else 0) (seq s n)) v =
  if Nat.leb s j && Nat.ltb j (s + n) then nth (j - s) v 0 else 0.
Proof.
  induction n as [| n IH]; intros s j v.
  - simpl. destruct (Nat.leb_spec s j), (Nat.ltb_spec j (s + 0)); simpl; try reflexivity; lia.
  - cbn [seq map]. destruct v as [| y v].
    + rewrite dot_nil_r. destruct (Nat.leb s j && Nat.ltb j (s + S n)); [|reflexivity].
      destruct (j - s)%nat; reflexivity.
    + change (dot (?a :: ?l) (y :: v)) with (a * y + dot l v). rewrite IH.
      destruct (Nat.eqb_spec s j) as [<- | Hne].
      * destruct (Nat.leb_spec (S s) s); [lia|]. destruct (Nat.leb_spec s s); [|lia].
        destruct (Nat.ltb_spec s (s + S n)); [|lia]. rewrite Nat.sub_diag. cbn -[Z.mul]. lia.
      * repeat match goal with
               | |- context [Nat.leb ?a ?b] => destruct (Nat.leb_spec a b)
               | |- context [Nat.ltb ?a ?b] => destruct (Nat.ltb_spec a b)
               end; simpl; try lia.
        replace (j - s)%nat with (S (j - S s)) by lia. simpl. lia.
Qed.

Lemma slice_map_seq : forall {B : Type} (f : nat -> B) N a b,
  0 <= a <= b -> b <= Z.of_nat N ->
  slice a b (map f (seq 0 N)) = map f (seq (Z.to_nat a) (Z.to_nat (b - a))).
Proof.
  intros B f N a b Hab HbN. destruct N as [| N'].
  { assert (a = 0 /\ b = 0) as [-> ->] by lia. reflexivity. }
  apply nth_ext with (d := f O) (d' := f O).
  - rewrite slice_length by (try rewrite map_length, seq_length; lia).
    rewrite map_length, seq_length. reflexivity.
  - intros i Hi. rewrite slice_length in Hi by (try rewrite map_length, seq_length; lia).
    unfold slice. rewrite nth_firstn' by lia. rewrite nth_skipn'.
    rewrite !nth_map_seq by lia. reflexivity.
Qed.

Lemma dot_slice_unit : forall N j a b v,
  0 <= a <= b -> b <= Z.of_nat N ->
  dot (slice a b (unit_row N j)) v =
  if (a <=? Z.of_nat j) && (Z.of_nat j <? b) then nth (Z.to_nat (Z.of_nat j - a)) v 0 else 0.
Proof.
  intros N j a b v Hab HbN. unfold unit_row. rewrite slice_map_seq by auto.
  rewrite dot_unit_seq.
  destruct (Nat.leb_spec (Z.to_nat a) j), (Nat.ltb_spec j (Z.to_nat a + Z.to_nat (b - a)));
    destruct (Z.leb_spec a (Z.of_nat j)), (Z.ltb_spec (Z.of_nat j) b); simpl; try lia.
  f_equal. lia.
Qed.

(* In words: with valid shared owners and intervals and ANY output gradients g_r of
   global_end - global_start rows, take owner q and a local row i < local_length of q,
   i.e. the global row j = owners[q] + i.  Then row i of q's backward result is
   - its own block's row, g_q[local_output_start + i] (the starting value in SPEC 8.2),
   - plus, for every other rank r in ascending order whose interval
     [global_start_r, global_end_r) contains j, the gradient g_r[j - global_start_r] of
     the output row that copied row j in the forward pass.
   So backward is exactly the transpose of the gather out_r[k] = x[global_start_r + k]
   (SPEC 8.1): each owner row collects the gradients of all the output rows that copied
   it.  It follows from theorem 5 by taking the bank with a single 1 at row j. *)
Theorem theorem5_dispatch_adjoint : forall o iv (g : nat -> list Z) q i,
  shared_ok o iv ->
  (forall r, (r < length iv)%nat ->
     Z.of_nat (length (g r)) = global_end (build o iv r) - global_start (build o iv r)) ->
  (q < length iv)%nat -> Z.of_nat i < local_length (build o iv q) ->
  let j := own o q + Z.of_nat i in
  nth i (backward (length iv) (build o iv) g q) 0 =
    nth (Z.to_nat (local_output_start (build o iv q)) + i) (g q) 0 +
    sumZ (map (fun r => if Nat.eqb r q then 0
                        else if (global_start (build o iv r) <=? j) && (j <? global_end (build o iv r))
                             then nth (Z.to_nat (j - global_start (build o iv r))) (g r) 0
                             else 0)
              (seq 0 (length iv))).
Proof.
  intros o iv g q i Hok Hg Hq Hi j.
  assert (Hj : j = own o q + Z.of_nat i) by reflexivity. clearbody j.
  simpl in Hg, Hi. simpl local_output_start.
  pose proof (own_le o iv Hok 0 (length iv) ltac:(lia)) as HP. rewrite (own_0 o iv Hok) in HP.
  pose proof (own_le o iv Hok 0 q ltac:(lia)) as Hq0. rewrite (own_0 o iv Hok) in Hq0.
  pose proof (interval_facts o iv Hok q Hq) as Hiq.
  set (N := Z.to_nat (own o (length iv))).
  set (jn := Z.to_nat j).
  assert (Hjn : Z.of_nat jn = j) by lia.
  set (x := unit_row N jn).
  assert (Hx : Z.of_nat (length x) = own o (length iv)).
  { unfold x, unit_row. rewrite map_length, seq_length. lia. }
  pose proof (adjoint_sum o iv Hok (shard o x) g (shard_length o iv x Hok Hx) Hg) as E.
  set (Fr := fun r => if (ist iv r <=? j) && (j <? ien iv r)
                      then nth (Z.to_nat (j - ist iv r)) (g r) 0 else 0).
  assert (EL : sumZ (map (fun r => dot (forward (length iv) (build o iv) (shard o x) r) (g r)) (seq 0 (length iv))) =
               sumZ (map Fr (seq 0 (length iv)))).
  { apply sumZ_map_ext. intros r Hr. apply in_seq in Hr.
    pose proof (interval_facts o iv Hok r ltac:(lia)).
    rewrite (forward_exact o iv x Hok Hx r) by lia. unfold x.
    rewrite dot_slice_unit by lia. rewrite Hjn. reflexivity. }
  assert (ER : sumZ (map (fun q' => dot (shard o x q') (backward (length iv) (build o iv) g q')) (seq 0 (length iv))) =
               nth i (backward (length iv) (build o iv) g q) 0).
  { rewrite (sumZ_single _ (length iv) q Hq). rewrite sumZ_map_zero.
    - unfold shard, x. rewrite dot_slice_unit by (pose proof (own_le o iv Hok (S q) (length iv) ltac:(lia)); lia).
      rewrite Hjn. destruct (Z.leb_spec (own o q) j); [|lia].
      destruct (Z.ltb_spec j (own o (S q))); [|lia]. simpl. rewrite Z.add_0_r. f_equal. lia.
    - intros r Hr. apply in_seq in Hr. destruct (Nat.eqb_spec r q); [reflexivity|].
      unfold shard, x.
      pose proof (own_le o iv Hok 0 r ltac:(lia)). rewrite (own_0 o iv Hok) in H.
      pose proof (own_le o iv Hok r (S r) ltac:(lia)).
      pose proof (own_le o iv Hok (S r) (length iv) ltac:(lia)).
      rewrite dot_slice_unit by lia. rewrite Hjn.
      destruct (Nat.lt_ge_cases r q).
      + pose proof (own_le o iv Hok (S r) q ltac:(lia)).
        destruct (Z.ltb_spec j (own o (S r))); [lia|]. rewrite andb_false_r. reflexivity.
      + pose proof (own_le o iv Hok (S q) r ltac:(lia)).
        destruct (Z.leb_spec (own o r) j); [lia|]. reflexivity. }
  rewrite <- ER, <- E, EL, (sumZ_single Fr (length iv) q Hq).
  f_equal.
  unfold Fr. destruct (Z.leb_spec (ist iv q) j); [|lia].
  destruct (Z.ltb_spec j (ien iv q)); [|lia]. simpl. f_equal. lia.
Qed.

(* ------------------------------------------------------------------------- *)
(* The API level: the routes interval_route returns                           *)

Lemma backward_ext : forall P (R1 R2 : nat -> route) (g1 g2 : nat -> list Z) r,
  (forall q, (q < P)%nat -> R1 q = R2 q) -> (forall q, (q < P)%nat -> g1 q = g2 q) ->
  (r < P)%nat -> backward P R1 g1 r = backward P R2 g2 r.
Proof.
  intros P R1 R2 g1 g2 r HR Hg Hr. unfold backward, all_to_all_v.
  rewrite HR, Hg by auto.
  replace (map (fun q => chunk r (output_splits (R1 q)) (backward_sendbuf (R1 q) (g1 q))) (seq 0 P))
    with (map (fun q => chunk r (output_splits (R2 q)) (backward_sendbuf (R2 q) (g2 q))) (seq 0 P));
    [reflexivity|].
  apply map_ext_in. intros q Hq. apply in_seq in Hq. rewrite HR, Hg by lia. reflexivity.
Qed.

(* In words: the same adjoint identity for the routes interval_route returns.  When every
   rank q's call interval_route (L q) q iv oo succeeds (same intervals and same owner
   argument on every rank), then for ANY local inputs x_q of local_length rows and ANY
   output gradients g_r of global_end - global_start rows,
   sum_r <forward_r, g_r> = sum_q <x_q, backward_q>, and backward_q has local_length
   rows. *)
Theorem theorem5_api : forall (L : nat -> Z) iv oo (R : nat -> route) (xs g : nat -> list Z),
  (forall q, (q < length iv)%nat -> interval_route (L q) (Z.of_nat q) iv oo = Some (R q)) ->
  (forall q, (q < length iv)%nat -> Z.of_nat (length (xs q)) = local_length (R q)) ->
  (forall r, (r < length iv)%nat -> Z.of_nat (length (g r)) = global_end (R r) - global_start (R r)) ->
  sumZ (map (fun r => dot (forward (length iv) R xs r) (g r)) (seq 0 (length iv))) =
  sumZ (map (fun q => dot (xs q) (backward (length iv) R g q)) (seq 0 (length iv))) /\
  (forall q, (q < length iv)%nat ->
     Z.of_nat (length (backward (length iv) R g q)) = local_length (R q)).
Proof.
  intros L iv oo R xs g HR Hxs Hg.
  destruct (length iv) as [| P'] eqn:HP.
  { split; [reflexivity | intros; lia]. }
  rewrite <- HP in *.
  destruct (interval_routes_build L iv oo R O HR ltac:(lia)) as [Hok HR'].
  set (o := owners_of (L O) iv oo) in *.
  destruct (theorem5_backward_adjoint o iv xs g Hok) as (Hadj & Hlen & _).
  - intros q Hq. rewrite <- HR' by auto. auto.
  - intros r Hr. rewrite <- HR' by auto. auto.
  - split.
    + rewrite (sumZ_map_ext _ (fun r => dot (forward (length iv) R xs r) (g r))
                            (fun r => dot (forward (length iv) (build o iv) xs r) (g r))).
      2:{ intros r Hr. apply in_seq in Hr. f_equal. apply forward_ext; auto. lia. }
      rewrite Hadj. apply sumZ_map_ext. intros q Hq. apply in_seq in Hq.
      f_equal. apply backward_ext; [intros; symmetry; auto | auto | lia].
    + intros q Hq. rewrite (backward_ext _ R (build o iv) g g) by auto.
      rewrite HR' by auto. auto.
Qed.
