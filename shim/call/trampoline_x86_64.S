// The trampoline pool for x86-64 SysV (shim/call/trampoline.h explains what a gate and a prepend entry do).
//
// Entry i (16 bytes at msprobe_trampoline_entries + 16*i) puts i in r11 and jumps to the common code, which finds
// row i of msprobe_trampoline_slots { fn, user, mode, after }. r10 and r11 are the only registers touched before
// the target runs: they carry nothing at a function's entry (the PLT and ld.so's resolver clobber them too).
#if defined(__x86_64__)
        .text

        // The argument registers as the caller passed them, from the gate/around frame's save area.
        .macro  restore_arguments
        movq    0(%rsp), %rdi
        movq    8(%rsp), %rsi
        movq    16(%rsp), %rdx
        movq    24(%rsp), %rcx
        movq    32(%rsp), %r8
        movq    40(%rsp), %r9
        movq    48(%rsp), %rax
        movaps  64(%rsp), %xmm0
        movaps  80(%rsp), %xmm1
        movaps  96(%rsp), %xmm2
        movaps  112(%rsp), %xmm3
        movaps  128(%rsp), %xmm4
        movaps  144(%rsp), %xmm5
        movaps  160(%rsp), %xmm6
        movaps  176(%rsp), %xmm7
        .endm

        .p2align 4
        .globl  msprobe_trampoline_entries
        .hidden msprobe_trampoline_entries
        .type   msprobe_trampoline_entries, @function
msprobe_trampoline_entries:
        .cfi_startproc                     // no frame: the caller's return address is at (%rsp)
        .set    i, 0
        .rept   4096                       // kTrampolines
        .p2align 4
        endbr64                            // a valid indirect-branch target under CET/IBT
        movl    $i, %r11d
        jmp     .Lcommon
        .set    i, i + 1
        .endr
        .cfi_endproc
        .size   msprobe_trampoline_entries, . - msprobe_trampoline_entries

        .p2align 4
        .type   msprobe_trampoline_common, @function
msprobe_trampoline_common:
.Lcommon:
        .cfi_startproc
        shlq    $5, %r11                   // 32-byte rows
        leaq    msprobe_trampoline_slots(%rip), %r10
        addq    %r10, %r11
        cmpq    $1, 16(%r11)               // mode
        je      .Lprepend

        // Gate and around: a frame with every argument register, an aligned call to decide(user, &saved gpr).
        // 192(%rsp): the row; 200(%rsp): the value the target returned (around); 56(%rsp) is gpr[7], the around flag.
        pushq   %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        movq    %rsp, %rbp
        .cfi_def_cfa_register %rbp
        subq    $208, %rsp                 // rsp is 16-aligned again (entry rsp is 8 mod 16)
        movq    %r11, 192(%rsp)
        movq    $0, 56(%rsp)
        movq    %rdi, 0(%rsp)
        movq    %rsi, 8(%rsp)
        movq    %rdx, 16(%rsp)
        movq    %rcx, 24(%rsp)
        movq    %r8, 32(%rsp)
        movq    %r9, 40(%rsp)
        movq    %rax, 48(%rsp)             // %al: vector registers used by a variadic call
        movaps  %xmm0, 64(%rsp)
        movaps  %xmm1, 80(%rsp)
        movaps  %xmm2, 96(%rsp)
        movaps  %xmm3, 112(%rsp)
        movaps  %xmm4, 128(%rsp)
        movaps  %xmm5, 144(%rsp)
        movaps  %xmm6, 160(%rsp)
        movaps  %xmm7, 176(%rsp)
        movq    8(%r11), %rdi              // user
        movq    %rsp, %rsi                 // saved rdi..r9
        call    *(%r11)                    // decide
        movq    %rax, %r11                 // where to go
        movq    192(%rsp), %r10
        cmpq    $2, 16(%r10)
        jne     .Ljump
        cmpq    $0, 56(%rsp)
        je      .Ljump

        // Around: call the target from this frame (no argument is on the stack), then after(user, &saved, result).
        restore_arguments
        call    *%r11
        movq    %rax, 200(%rsp)
        movq    192(%rsp), %r10
        movq    8(%r10), %rdi              // user
        movq    %rsp, %rsi                 // the argument registers as the caller passed them
        movq    %rax, %rdx                 // the result
        call    *24(%r10)                  // after
        movq    200(%rsp), %rax
        .cfi_remember_state
        movq    %rbp, %rsp
        popq    %rbp
        .cfi_def_cfa %rsp, 8
        ret
        .cfi_restore_state

.Ljump:
        restore_arguments
        movq    %rbp, %rsp
        popq    %rbp
        .cfi_restore %rbp
        .cfi_def_cfa %rsp, 8
        jmp     *%r11                      // the caller's frame, registers and stack, as they were

.Lprepend:
        // Prepend: target(user, a0..a4); the call's own a5 (r9) is dropped (kPrependMaxArgs).
        movq    %r8, %r9
        movq    %rcx, %r8
        movq    %rdx, %rcx
        movq    %rsi, %rdx
        movq    %rdi, %rsi
        movq    8(%r11), %rdi
        jmp     *(%r11)
        .cfi_endproc
        .size   msprobe_trampoline_common, . - msprobe_trampoline_common
#endif
        .section .note.GNU-stack, "", @progbits
