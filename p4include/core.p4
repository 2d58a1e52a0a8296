/* core.p4: the P4_16 core library for p4sec, written from the language specification's interface. */
#ifndef _CORE_P4_
#define _CORE_P4_

/// Standard error codes. New error codes can be declared by programs.
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

extern packet_in {
    /// Read a header from the packet into a fixed-size header and advance the cursor.
    void extract<T>(out T hdr);
    /// Read a header with a varbit field of `variableFieldSizeInBits` bits.
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    /// Read bits from the packet without advancing the cursor.
    T lookahead<T>();
    /// Skip bits.
    void advance(in bit<32> sizeInBits);
    /// Length of the packet in bytes.
    bit<32> length();
}

extern packet_out {
    /// Write a header (or all valid headers of a struct/stack/union) into the output packet.
    void emit<T>(in T hdr);
}

/// Raise `toSignal` and reject the packet when `check` is false (parsers only).
extern void verify(in bool check, in error toSignal);

@noWarn("unused")
action NoAction() {}

match_kind {
    exact,
    ternary,
    lpm
}

/// Compile-time assertion.
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

#endif  /* _CORE_P4_ */
