// PFAC: Parallel Failureless Aho-Corasick, one walk per start offset.
//
// Compiled by build.rs (glslc --target-env=vulkan1.0 -O); the SPIR-V is also
// committed as shaders/pfac.spv for machines without glslc, and
// .ci/check-spirv fails when the two differ.
//
// The automaton is built on the host (src/engine/pfac/mod.rs): a DFA whose
// state is (depth, set of patterns still alive). It has no failure links:
// a walk starts in state 0 at some offset `start` and ends at the first byte
// for which no pattern is alive (DEAD) or at the end of the haystack. Every
// state entered reports its outputs (patterns ending there) at `start`.
//
//   for each start in [start_begin, start_end), in parallel:
//       s <- 0
//       for i <- start, start+1, ... while i < hay_len:
//           t <- T[s][hay[i]]
//           if t = DEAD: stop
//           s <- t without its HAS_OUTPUT bit
//           if t has HAS_OUTPUT:
//               k <- atomically add |out(s)| to the hit counter
//               write (out(s)[j], start) to hits[k + j] for each j
//                   where k + j < capacity
//
// A pattern with k leading wildcards is in the table without them; the host
// reports its hits at start - k (and drops those before the haystack).
//
// The counter keeps counting past `capacity`: the host compares it with the
// capacity and, when it is larger, runs the same range again with a larger
// buffer (or split into smaller ranges), so a hit is never lost.

#version 450

// 64 invocations per workgroup: a multiple of the subgroup size of every
// current GPU (32 or 64) and of llvmpipe's (8).
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

// The haystack, 4 bytes per uint, little-endian (byte i is bits
// 8*(i%4) .. 8*(i%4)+7 of word i/4). Bytes past hay_len are never read.
layout(std430, set = 0, binding = 0) readonly buffer Haystack {
    uint hay[];
};

// T[s][b] = transitions[s * 256 + b]: next state, HAS_OUTPUT flag in bit 31,
// or DEAD. State 0 is the start state.
layout(std430, set = 0, binding = 1) readonly buffer Transitions {
    uint transitions[];
};

// Per state: (first index in `outputs`, number of outputs).
layout(std430, set = 0, binding = 2) readonly buffer OutRanges {
    uvec2 out_range[];
};

// Pattern ids (indices into the host's pattern slice), grouped by state.
layout(std430, set = 0, binding = 3) readonly buffer Outputs {
    uint outputs[];
};

// The hit counter and the hit records, (pattern, walk start) each.
// `saturated` is set once the counter has passed 2^31: a 32-bit counter
// could then wrap, so the host no longer trusts it and splits the range.
layout(std430, set = 0, binding = 4) buffer Results {
    uint hit_count;
    uint saturated;
    uvec2 hits[];
};

layout(push_constant) uniform Params {
    uint hay_len;      // bytes in the haystack; walks never read past it
    uint start_begin;  // first start offset searched by this dispatch
    uint start_end;    // one past the last start offset
    uint capacity;     // number of records `hits` can hold
} params;

const uint DEAD = 0xFFFFFFFFu;
const uint HAS_OUTPUT = 0x80000000u;

// Byte i of the haystack.
uint hay_byte(uint i) {
    return (hay[i >> 2] >> ((i & 3u) << 3)) & 0xFFu;
}

// Reports every pattern of `state` as matching at `start`.
void report(uint state, uint start) {
    uvec2 range = out_range[state];
    uint first = atomicAdd(hit_count, range.y);
    if (first >= 0x80000000u) {
        saturated = 1u;
    }
    for (uint j = 0u; j < range.y; ++j) {
        uint slot = first + j;
        if (slot < params.capacity) {
            hits[slot] = uvec2(outputs[range.x + j], start);
        }
    }
}

void main() {
    // Grid-stride loop: however many workgroups were dispatched (the host
    // caps the count at maxComputeWorkGroupCount), the invocations together
    // cover every start offset. Neighbouring invocations take neighbouring
    // offsets, so their first reads hit the same haystack words.
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint start = params.start_begin + gl_GlobalInvocationID.x;
         start < params.start_end;
         start += stride) {
        uint state = 0u;
        for (uint i = start; i < params.hay_len; ++i) {
            uint t = transitions[(state << 8) | hay_byte(i)];
            if (t == DEAD) {
                break;
            }
            state = t & ~HAS_OUTPUT;
            if ((t & HAS_OUTPUT) != 0u) {
                report(state, start);
            }
        }
    }
}
