/** A module whose import fails, for the `opkit generate crd` error message. */
throw new Error("boom at import time");
