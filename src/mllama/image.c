/* >>mllama-image ==================================================================================
   Image preprocessing (being written). */
