// The trampoline pool for AAPCS64 (shim/call/trampoline.h explains what a gate and a prepend entry do).
//
// Entry i (8 bytes at msprobe_trampoline_entries + 8*i) puts i in x16 and branches to the common code, which finds
// row i of msprobe_trampoline_slots { fn, user, mode, after }. Only x9, x16 and x17 are touched before the target
// runs: temporaries that carry nothing at a function's entry (x16/x17 are the linker's veneer registers).
#if defined(__aarch64__)
        .text

        // The argument registers as the caller passed them, from the gate/around frame's save area.
        .macro  restore_arguments
        ldp     x0, x1, [sp, #16]
        ldp     x2, x3, [sp, #32]
        ldp     x4, x5, [sp, #48]
        ldp     x6, x7, [sp, #64]
        ldr     x8, [sp, #80]
        ldp     q0, q1, [sp, #96]
        ldp     q2, q3, [sp, #128]
        ldp     q4, q5, [sp, #160]
        ldp     q6, q7, [sp, #192]
        .endm

        .p2align 3
        .globl  msprobe_trampoline_entries
        .hidden msprobe_trampoline_entries
        .type   msprobe_trampoline_entries, %function
msprobe_trampoline_entries:
        .cfi_startproc                     // no frame: the return address is still in x30
        .set    i, 0
        .rept   4096                       // kTrampolines
        movz    x16, #i
        b       .Lcommon
        .set    i, i + 1
        .endr
        .cfi_endproc
        .size   msprobe_trampoline_entries, . - msprobe_trampoline_entries

        .p2align 4
        .type   msprobe_trampoline_common, %function
msprobe_trampoline_common:
.Lcommon:
        .cfi_startproc
        adrp    x17, msprobe_trampoline_slots
        add     x17, x17, :lo12:msprobe_trampoline_slots
        add     x17, x17, x16, lsl #5      // 32-byte rows
        ldar    x16, [x17]                 // fn, acquire: published after user and mode
        ldr     x9, [x17, #16]             // mode
        cmp     x9, #1
        b.eq    .Lprepend

        // Gate and around: a frame with every argument register, a call to decide(user, &saved x0..x7).
        // [sp, #224]: the row; [sp, #232]: the value the target returned (around); [sp, #88] is gpr[9], the
        // around flag.
        stp     x29, x30, [sp, #-240]!
        .cfi_def_cfa_offset 240
        .cfi_offset x29, -240
        .cfi_offset x30, -232
        mov     x29, sp
        str     x17, [sp, #224]
        str     xzr, [sp, #88]
        stp     x0, x1, [sp, #16]
        stp     x2, x3, [sp, #32]
        stp     x4, x5, [sp, #48]
        stp     x6, x7, [sp, #64]
        str     x8, [sp, #80]              // indirect result location (struct returns)
        stp     q0, q1, [sp, #96]
        stp     q2, q3, [sp, #128]
        stp     q4, q5, [sp, #160]
        stp     q6, q7, [sp, #192]
        ldr     x0, [x17, #8]              // user
        add     x1, sp, #16                // saved x0..x7
        blr     x16                        // decide
        mov     x16, x0                    // where to go
        ldr     x17, [sp, #224]
        ldr     x9, [x17, #16]
        cmp     x9, #2
        b.ne    .Ljump
        ldr     x9, [sp, #88]
        cbz     x9, .Ljump

        // Around: call the target from this frame (no argument is on the stack), then after(user, &saved, result).
        restore_arguments
        blr     x16
        str     x0, [sp, #232]
        ldr     x17, [sp, #224]
        ldr     x9, [x17, #24]             // after
        ldr     x0, [x17, #8]              // user
        add     x1, sp, #16                // the argument registers as the caller passed them
        ldr     x2, [sp, #232]             // the result
        blr     x9
        ldr     x0, [sp, #232]
        .cfi_remember_state
        ldp     x29, x30, [sp], #240
        .cfi_def_cfa_offset 0
        .cfi_restore x29
        .cfi_restore x30
        ret
        .cfi_restore_state

.Ljump:
        restore_arguments
        ldp     x29, x30, [sp], #240
        .cfi_def_cfa_offset 0
        .cfi_restore x29
        .cfi_restore x30
        br      x16                        // the caller's frame, registers and stack, as they were

.Lprepend:
        // Prepend: target(user, a0..a6); the call's own a7 (x7) is dropped (kPrependMaxArgs).
        mov     x7, x6
        mov     x6, x5
        mov     x5, x4
        mov     x4, x3
        mov     x3, x2
        mov     x2, x1
        mov     x1, x0
        ldr     x0, [x17, #8]
        br      x16
        .cfi_endproc
        .size   msprobe_trampoline_common, . - msprobe_trampoline_common
#endif
        .section .note.GNU-stack, "", %progbits
