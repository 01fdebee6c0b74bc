/** A module without kinds, for the `opkit generate crd` error message. */
export const answer = 42;
