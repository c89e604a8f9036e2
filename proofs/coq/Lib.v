(* Generic lemmas about sums, slices, chunks and inner products on lists. *)

From Coq Require Import ZArith Lia List Bool.
From Hpref Require Import Model.
Import ListNotations.
Open Scope Z_scope.

(* ------------------------------------------------------------------------- *)
(* sums                                                                       *)

Lemma sumZ_app : forall l1 l2, sumZ (l1 ++ l2) = sumZ l1 + sumZ l2.
Proof. induction l1; simpl; intros; [lia | rewrite IHl1; lia]. Qed.

Lemma sumZ_telescope : forall (f : nat -> Z) n a,
  sumZ (map (fun q => f (S q) - f q) (seq a n)) = f (a + n)%nat - f a.
Proof.
  induction n; intros a; simpl.
  - rewrite Nat.add_0_r; lia.
  - rewrite IHn. replace (S a + n)%nat with (a + S n)%nat by lia. lia.
Qed.

Lemma sumZ_map_ext : forall (A : Type) (f g : A -> Z) l,
  (forall x, In x l -> f x = g x) -> sumZ (map f l) = sumZ (map g l).
Proof.
  induction l; simpl; intros H; auto.
  rewrite H by auto. rewrite IHl; auto.
Qed.

Lemma sumZ_map_add : forall (A : Type) (f g : A -> Z) l,
  sumZ (map (fun x => f x + g x) l) = sumZ (map f l) + sumZ (map g l).
Proof. induction l; simpl; lia. Qed.

Lemma sumZ_map_zero : forall (A : Type) (f : A -> Z) l,
  (forall x, In x l -> f x = 0) -> sumZ (map f l) = 0.
Proof. induction l; simpl; intros H; auto. rewrite H by auto. rewrite IHl; auto. Qed.

Lemma sumZ_swap : forall (A B : Type) (f : A -> B -> Z) la lb,
  sumZ (map (fun a => sumZ (map (fun b => f a b) lb)) la) =
  sumZ (map (fun b => sumZ (map (fun a => f a b) la)) lb).
Proof.
  induction la; simpl; intros.
  - rewrite sumZ_map_zero; auto.
  - rewrite IHla. rewrite <- sumZ_map_add. reflexivity.
Qed.

Lemma sumZ_nonneg : forall l, Forall (fun c => 0 <= c) l -> 0 <= sumZ l.
Proof. induction 1; simpl; lia. Qed.

Lemma seq_split : forall a n m, seq a (n + m) = seq a n ++ seq (a + n) m.
Proof. intros. apply seq_app. Qed.

(* ------------------------------------------------------------------------- *)
(* slices                                                                     *)

Lemma skipn_skipn : forall {A : Type} n m (l : list A), skipn n (skipn m l) = skipn (n + m) l.
Proof.
  intros A n m; revert n; induction m; intros n l.
  - rewrite Nat.add_0_r; reflexivity.
  - destruct l; simpl.
    + rewrite !skipn_nil; reflexivity.
    + rewrite IHm. replace (n + S m)%nat with (S (n + m)) by lia. reflexivity.
Qed.

Lemma In_firstn : forall {A : Type} n x (l : list A), In x (firstn n l) -> In x l.
Proof.
  intros. rewrite <- (firstn_skipn n l). apply in_or_app. auto.
Qed.

Section Slices.
Context {A : Type}.

Lemma slice_empty : forall a b (l : list A), b <= a -> slice a b l = [].
Proof.
  intros. unfold slice. replace (Z.to_nat (b - a)) with O by lia. reflexivity.
Qed.

Lemma slice_length : forall a b (l : list A),
  0 <= a <= b -> b <= Z.of_nat (length l) -> length (slice a b l) = Z.to_nat (b - a).
Proof.
  intros. unfold slice. rewrite firstn_length, skipn_length. lia.
Qed.

Lemma slice_length_le : forall a b (l : list A), (length (slice a b l) <= Z.to_nat (b - a))%nat.
Proof. intros. unfold slice. rewrite firstn_length. lia. Qed.

Lemma firstn_skipn_add : forall n m (l : list A),
  firstn n l ++ firstn m (skipn n l) = firstn (n + m) l.
Proof.
  induction n; intros m l; simpl; auto.
  destruct l; simpl; auto. destruct m; reflexivity.
  f_equal. apply IHn.
Qed.

Lemma slice_app : forall a b c (l : list A),
  0 <= a <= b -> b <= c -> slice a b l ++ slice b c l = slice a c l.
Proof.
  intros. unfold slice.
  replace (Z.to_nat b) with (Z.to_nat (b - a) + Z.to_nat a)%nat by lia.
  rewrite <- skipn_skipn, firstn_skipn_add. f_equal. lia.
Qed.

Lemma slice_slice : forall a b off n (l : list A),
  0 <= a -> 0 <= off -> 0 <= n -> off + n <= b - a ->
  slice off (off + n) (slice a b l) = slice (a + off) (a + off + n) l.
Proof.
  intros. unfold slice.
  replace (off + n - off) with n by lia. replace (a + off + n - (a + off)) with n by lia.
  rewrite skipn_firstn_comm, firstn_firstn, skipn_skipn.
  f_equal; [lia | f_equal; lia].
Qed.

Lemma slice_all : forall (l : list A), slice 0 (Z.of_nat (length l)) l = l.
Proof. intros. unfold slice. rewrite Z.sub_0_r, Nat2Z.id. simpl. apply firstn_all. Qed.

Lemma slice_concat_telescope : forall (f : nat -> Z) (l : list A) n a,
  0 <= f a -> (forall q, (a <= q < a + n)%nat -> f q <= f (S q)) ->
  concat (map (fun q => slice (f q) (f (S q)) l) (seq a n)) = slice (f a) (f (a + n)%nat) l.
Proof.
  induction n; intros a H0 Hm; simpl.
  - rewrite Nat.add_0_r. rewrite slice_empty by lia. reflexivity.
  - rewrite IHn.
    + replace (S a + n)%nat with (a + S n)%nat by lia.
      apply slice_app; [split; [lia | apply Hm; lia] |].
      (* f (S a) <= f (a + S n) by monotonicity *)
      assert (forall k, (k <= n)%nat -> f (S a) <= f (S a + k)%nat).
      { induction k; intros; [rewrite Nat.add_0_r; lia|].
        specialize (IHk ltac:(lia)). specialize (Hm (S a + k)%nat ltac:(lia)).
        replace (S a + S k)%nat with (S (S a + k)) by lia. lia. }
      specialize (H n ltac:(lia)). replace (a + S n)%nat with (S a + n)%nat by lia. lia.
    + specialize (Hm a ltac:(lia)). lia.
    + intros. apply Hm. lia.
Qed.

Lemma firstn_app_exact : forall n (l1 l2 : list A), length l1 = n -> firstn n (l1 ++ l2) = l1.
Proof.
  intros; subst. rewrite firstn_app, Nat.sub_diag, firstn_all. simpl. apply app_nil_r.
Qed.

Lemma skipn_app_exact : forall n (l1 l2 : list A), length l1 = n -> skipn n (l1 ++ l2) = l2.
Proof.
  intros; subst. rewrite skipn_app, Nat.sub_diag, skipn_all. reflexivity.
Qed.

(* ------------------------------------------------------------------------- *)
(* chunks                                                                     *)

Lemma chunk_0 : forall c cs (buf : list A), 0 <= c -> chunk 0 (c :: cs) buf = firstn (Z.to_nat c) buf.
Proof. intros. unfold chunk, slice. simpl. f_equal. f_equal. lia. Qed.

Lemma chunk_S : forall k c cs (buf : list A),
  0 <= c -> Forall (fun x => 0 <= x) cs ->
  chunk (S k) (c :: cs) buf = chunk k cs (skipn (Z.to_nat c) buf).
Proof.
  intros. unfold chunk, slice. simpl.
  assert (0 <= sumZ (firstn k cs)).
  { apply sumZ_nonneg. apply Forall_forall. intros x Hx. rewrite Forall_forall in H0.
    apply H0. eapply In_firstn; eauto. }
  rewrite skipn_skipn. f_equal; [f_equal; lia | f_equal; lia].
Qed.

End Slices.

(* ------------------------------------------------------------------------- *)
(* nth on map/seq, firstn, skipn                                              *)

Lemma nth_map_seq : forall {B : Type} (f : nat -> B) n a i d,
  (i < n)%nat -> nth i (map f (seq a n)) d = f (a + i)%nat.
Proof.
  intros. rewrite nth_indep with (d' := f O) by (rewrite map_length, seq_length; lia).
  rewrite map_nth, seq_nth by lia. reflexivity.
Qed.

Lemma firstn_seq : forall a d n, (d <= n)%nat -> firstn d (seq a n) = seq a d.
Proof.
  intros. replace n with (d + (n - d))%nat by lia. rewrite seq_app.
  apply firstn_app_exact. apply seq_length.
Qed.

Lemma nth_skipn' : forall {A : Type} n i (l : list A) d, nth i (skipn n l) d = nth (n + i) l d.
Proof.
  induction n; intros; simpl; auto. destruct l; simpl; auto. destruct i; auto.
Qed.

Lemma nth_firstn' : forall {A : Type} n i (l : list A) d, (i < n)%nat -> nth i (firstn n l) d = nth i l d.
Proof.
  induction n; intros; [lia|]. destruct l; simpl; auto. destruct i; auto. apply IHn. lia.
Qed.

Lemma gather_slice : forall x s e,
  0 <= s <= e -> e <= Z.of_nat (length x) -> gather x s e = slice s e x.
Proof.
  intros. apply nth_ext with (d := 0) (d' := 0).
  - unfold gather. rewrite map_length, seq_length, slice_length; auto.
  - intros i Hi. unfold gather in *. rewrite map_length, seq_length in Hi.
    rewrite nth_map_seq by auto. unfold slice.
    rewrite nth_firstn' by lia. rewrite nth_skipn'. reflexivity.
Qed.

(* ------------------------------------------------------------------------- *)
(* chunks of a concatenation                                                  *)

Lemma chunk_concat : forall {A : Type} (pieces : list (list A)) counts k,
  length pieces = length counts ->
  (forall i, (i < length pieces)%nat -> Z.of_nat (length (nth i pieces [])) = nth i counts 0) ->
  (k < length pieces)%nat ->
  chunk k counts (concat pieces) = nth k pieces [].
Proof.
  induction pieces as [| p ps IH]; intros counts k Hlen Hc Hk; simpl in *; [lia|].
  destruct counts as [| c cs]; simpl in Hlen; [lia|].
  assert (Hc0 := Hc O ltac:(lia)). simpl in Hc0.
  destruct k as [| k].
  - rewrite chunk_0 by lia. apply firstn_app_exact. lia.
  - rewrite chunk_S by (try lia; apply Forall_nth; intros i d Hi;
                        rewrite nth_indep with (d' := 0) by lia;
                        specialize (Hc (S i) ltac:(lia)); simpl in Hc; lia).
    rewrite skipn_app_exact by lia. apply IH; try lia.
    intros i Hi. specialize (Hc (S i) ltac:(lia)). simpl in Hc. auto.
Qed.

Lemma chunk_concat_seq : forall {A : Type} (pc : nat -> list A) (c : nat -> Z) n k,
  (forall i, (i < n)%nat -> Z.of_nat (length (pc i)) = c i) -> (k < n)%nat ->
  chunk k (map c (seq 0 n)) (concat (map pc (seq 0 n))) = pc k.
Proof.
  intros. rewrite chunk_concat.
  - rewrite nth_map_seq by auto. reflexivity.
  - rewrite !map_length. reflexivity.
  - intros i Hi. rewrite map_length, seq_length in Hi. rewrite !nth_map_seq by auto. auto.
  - rewrite map_length, seq_length. auto.
Qed.

Lemma concat_chunks : forall {A : Type} counts (buf : list A),
  Forall (fun c => 0 <= c) counts -> sumZ counts = Z.of_nat (length buf) ->
  concat (map (fun k => chunk k counts buf) (seq 0 (length counts))) = buf.
Proof.
  induction counts as [| c cs IH]; intros buf Hnn Hsum; simpl in *.
  - destruct buf; simpl in *; auto; lia.
  - inversion Hnn; subst.
    rewrite chunk_0 by auto. rewrite <- seq_shift, map_map.
    erewrite map_ext_in.
    2:{ intros k _. rewrite chunk_S by auto. reflexivity. }
    rewrite IH; auto.
    + apply firstn_skipn.
    + rewrite skipn_length. pose proof (sumZ_nonneg cs H2). lia.
Qed.

Lemma length_concat_seq : forall {A : Type} (f : nat -> list A) a n,
  Z.of_nat (length (concat (map f (seq a n)))) = sumZ (map (fun q => Z.of_nat (length (f q))) (seq a n)).
Proof.
  intros A f a n; revert a; induction n; intros; simpl; auto.
  rewrite app_length, Nat2Z.inj_add, IHn. reflexivity.
Qed.

(* ------------------------------------------------------------------------- *)
(* inner products                                                             *)

Lemma dot_nil_r : forall a, dot a [] = 0.
Proof. destruct a; reflexivity. Qed.

(* dot of a concatenation against any list: the second list is cut where the first
   list's pieces end (no length condition: dot stops at the shorter list). *)
Lemma dot_app_firstn : forall a1 a2 b,
  dot (a1 ++ a2) b = dot a1 (firstn (length a1) b) + dot a2 (skipn (length a1) b).
Proof.
  induction a1 as [| x a1 IH]; intros a2 b; simpl.
  - lia.
  - destruct b as [| y b]; simpl.
    + rewrite dot_nil_r. lia.
    + rewrite IH. lia.
Qed.

(* The usual form, for equal-length first pieces. *)
Lemma dot_app : forall a1 a2 b1 b2,
  length a1 = length b1 -> dot (a1 ++ a2) (b1 ++ b2) = dot a1 b1 + dot a2 b2.
Proof.
  intros a1 a2 b1 b2 H. rewrite dot_app_firstn, H, firstn_app_exact, skipn_app_exact; auto.
Qed.

Lemma dot_concat_seq : forall (f g : nat -> list Z) n a,
  (forall q, (a <= q < a + n)%nat -> length (f q) = length (g q)) ->
  dot (concat (map f (seq a n))) (concat (map g (seq a n))) =
  sumZ (map (fun q => dot (f q) (g q)) (seq a n)).
Proof.
  intros f g n; induction n; intros a H; simpl; auto.
  rewrite dot_app by (apply H; lia). rewrite IHn; auto. intros; apply H; lia.
Qed.

Lemma length_add_rows : forall rows base, length (add_rows rows base) = length base.
Proof. induction rows; destruct base; simpl; auto. Qed.

Lemma length_add_at : forall off rows base, length (add_at off rows base) = length base.
Proof.
  intros. unfold add_at. rewrite app_length, length_add_rows, <- app_length, firstn_skipn. auto.
Qed.

Lemma dot_add_rows : forall rows base a,
  (length rows <= length base)%nat -> length a = length base ->
  dot a (add_rows rows base) = dot a base + dot (firstn (length rows) a) rows.
Proof.
  induction rows; intros base a0 H1 H2; simpl.
  - destruct base; destruct a0; simpl; lia.
  - destruct base; simpl in *; [lia|]. destruct a0; simpl in *; [lia|].
    rewrite IHrows by lia. lia.
Qed.

Lemma dot_add_at : forall off rows base a,
  0 <= off -> off + Z.of_nat (length rows) <= Z.of_nat (length base) ->
  length a = length base ->
  dot a (add_at off rows base) =
  dot a base + dot (slice off (off + Z.of_nat (length rows)) a) rows.
Proof.
  intros. unfold add_at.
  set (n := Z.to_nat off).
  assert (Hsplit : forall b, length b = length base ->
            dot b base = dot (firstn n b) (firstn n base) + dot (skipn n b) (skipn n base)).
  { intros b Hb. rewrite <- dot_app by (rewrite !firstn_length; lia).
    rewrite !firstn_skipn. reflexivity. }
  rewrite Hsplit by auto.
  rewrite <- (firstn_skipn n a) at 1.
  rewrite dot_app by (rewrite !firstn_length; lia).
  rewrite dot_add_rows by (rewrite !skipn_length; lia).
  unfold slice. replace (off + Z.of_nat (length rows) - off) with (Z.of_nat (length rows)) by lia.
  rewrite Nat2Z.id. fold n. lia.
Qed.

Lemma dot_fold_add_at : forall (off : nat -> Z) (rows : nat -> list Z) l base a,
  length a = length base ->
  (forall p, In p l -> 0 <= off p /\ off p + Z.of_nat (length (rows p)) <= Z.of_nat (length base)) ->
  dot a (fold_left (fun acc p => add_at (off p) (rows p) acc) l base) =
  dot a base + sumZ (map (fun p => dot (slice (off p) (off p + Z.of_nat (length (rows p))) a) (rows p)) l).
Proof.
  induction l as [| p l IH]; intros base a Hl H; simpl; [lia|].
  rewrite IH.
  - rewrite dot_add_at; [lia | apply H; simpl; auto | apply H; simpl; auto | auto].
  - rewrite length_add_at. auto.
  - intros. rewrite length_add_at. apply H. simpl; auto.
Qed.
