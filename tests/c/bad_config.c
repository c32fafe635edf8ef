/*
 * Run with a bad REMORA_* variable (the test sets it): SCIInitialize must refuse it with
 * SCI_ERR_ILLEGAL_PARAMETER (the library also prints one line on stderr naming the
 * variable).  Prints the error code's name and exits 0 when the code is the documented one.
 */
#include <stdio.h>
#include "sisci_api.h"

int main(void)
{
    sci_error_t err;
    sci_desc_t dev;

    SCIInitialize(0, &err);
    if (err == SCI_ERR_OK) {
        /* Some variables are read at open time only. */
        SCIOpen(&dev, 0, &err);
        if (err == SCI_ERR_OK) {
            printf("accepted\n");
            SCIClose(dev, 0, &err);
            SCITerminate();
            return 1;
        }
    }
    printf("refused with 0x%x\n", (unsigned)err);
    return err == SCI_ERR_ILLEGAL_PARAMETER ? 0 : 2;
}
